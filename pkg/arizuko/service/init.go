package service

import (
	"context"
	"errors"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// AdminPrincipal is the identity of the data dir's own token and of the CLI
// working on the data dir directly; init makes it an operator.
const AdminPrincipal = "user:admin"

// Bootstrap makes AdminPrincipal a member of role:operator. It writes the
// store directly: it is the root of trust, run by whoever owns the data dir.
func (l *Local) Bootstrap(ctx context.Context) error {
	err := l.st.InsertEdge(ctx, acl.Edge{Member: AdminPrincipal, Role: "role:operator"}, "init")
	if err != nil && !errors.Is(err, store.ErrExists) {
		return err
	}
	l.invalidate()
	return nil
}
