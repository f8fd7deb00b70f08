package service

import (
	"context"
	"errors"
	"fmt"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// ErrWrongKey is a key ring that cannot open this store's secrets.
var ErrWrongKey = errors.New("the secrets key does not open this store")

const keyCheckText = "arizuko key check"

// CheckKey proves the key ring opens this store. A store holds one value
// sealed for that purpose; a store from before it must open every sealed row,
// and then gets one. Without a ring there is nothing to check.
func (l *Local) CheckKey(ctx context.Context) error {
	r := l.opts.Ring
	if r == nil {
		return nil
	}
	aad := secrets.AAD(store.KeyCheckKind, "", "")
	v, err := l.st.KeyCheck(ctx)
	switch {
	case err == nil:
		if _, err := r.Open(aad, v); err != nil {
			return fmt.Errorf("%w: its key check does not open under any key of the ring; start with the key it was sealed with "+
				"(to change keys put the new one first and the old one after it, then run `arizuko secret rotate`): %w", ErrWrongKey, ErrUnavailable)
		}
		return nil
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	rows, err := l.st.SecretRows(ctx, "", "")
	if err != nil {
		return err
	}
	for _, row := range rows {
		if _, err := r.Open(secrets.AAD(row.ScopeKind, row.ScopeID, row.Name), row.Value); err != nil {
			return fmt.Errorf("%w: secret %s:%s %s does not open under any key of the ring: %w", ErrWrongKey, row.ScopeKind, row.ScopeID, row.Name, ErrUnavailable)
		}
	}
	sealed, err := r.Seal(aad, []byte(keyCheckText))
	if err != nil {
		return err
	}
	return l.st.PutKeyCheck(ctx, sealed)
}
