package service

import (
	"context"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// MaxSecret bounds one secret value.
const MaxSecret = 64 << 10

// secretScope parses "folder:<path>" or "user:<id>" and returns the kind, id
// and the acl scope that authorizes it (user secrets need the whole tree).
func secretScope(s string) (kind, id, aclScope string, err error) {
	kind, id, _ = strings.Cut(s, ":")
	switch kind {
	case "folder":
		if err := folder.Validate(id); err != nil {
			return "", "", "", err
		}
		return kind, id, id, nil
	case "user":
		if err := acl.ValidatePrincipal(s); err != nil {
			return "", "", "", err
		}
		return kind, id, "", nil
	}
	return "", "", "", invalid("secret scope %q: want folder:<path> or user:<id>", s)
}

func validSecretName(n string) error {
	if n == "" || len(n) > 128 {
		return invalid("secret name %q: want 1..128 characters", n)
	}
	for i := 0; i < len(n); i++ {
		c := n[i]
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return invalid("secret name %q: want an environment variable name ([A-Za-z_][A-Za-z0-9_]*)", n)
		}
	}
	return nil
}

func (l *Local) ring() (*secrets.Ring, error) {
	if l.opts.Ring == nil {
		return nil, fmt.Errorf("secrets: set $%s or a key file: %w", secrets.EnvKey, ErrUnavailable)
	}
	// Nothing is sealed or opened under a ring that has not proved it fits
	// this store, so a wrong key never mixes into it.
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	if !l.keyOK {
		if err := l.CheckKey(context.Background()); err != nil {
			return nil, err
		}
		l.keyOK = true
	}
	return l.opts.Ring, nil
}

// SetSecret seals and stores a value; needs secret:set on the scope.
func (l *Local) SetSecret(ctx context.Context, in SecretIn) error {
	kind, id, scope, err := secretScope(in.Scope)
	if err != nil {
		return err
	}
	if err := validSecretName(in.Name); err != nil {
		return err
	}
	if in.Value == "" {
		return invalid("secret %s is empty; give it a value (an empty secret is never what an agent needs)", in.Name)
	}
	if len(in.Value) > MaxSecret {
		return invalid("secret value is %d bytes, the limit is %d", len(in.Value), MaxSecret)
	}
	if err := l.check(ctx, "secret:set", scope); err != nil {
		return err
	}
	r, err := l.ring()
	if err != nil {
		return err
	}
	if kind == "folder" {
		if _, err := l.st.GetFolder(ctx, id); err != nil {
			return err
		}
	}
	// Any secret may be injected by a later grant; one injection refuses
	// would fail every turn of the folder until it changes.
	if err := inject.CheckValue(in.Name, in.Value); err != nil {
		return invalid("%w", err)
	}
	sealed, err := r.Seal(secrets.AAD(kind, id, in.Name), []byte(in.Value))
	if err != nil {
		return err
	}
	return l.st.PutSecret(ctx, store.SecretRow{ScopeKind: kind, ScopeID: id, Name: in.Name, Value: sealed})
}

// RemoveSecret deletes a value; needs secret:rm on the scope.
func (l *Local) RemoveSecret(ctx context.Context, scope, name string) error {
	kind, id, s, err := secretScope(scope)
	if err != nil {
		return err
	}
	if err := l.check(ctx, "secret:rm", s); err != nil {
		return err
	}
	return l.st.DeleteSecret(ctx, kind, id, name)
}

// ListSecrets lists names (never values) of one scope, or all when scope is "".
func (l *Local) ListSecrets(ctx context.Context, scope string) ([]store.SecretName, error) {
	if scope == "" {
		show, err := l.visible(ctx, "secret:read")
		if err != nil {
			return nil, err
		}
		ns, err := l.st.ListSecretNames(ctx, "", "")
		return filter(ns, show, func(n store.SecretName) string {
			if n.ScopeKind == "folder" {
				return n.ScopeID
			}
			return ""
		}), err
	}
	kind, id, s, err := secretScope(scope)
	if err != nil {
		return nil, err
	}
	if err := l.check(ctx, "secret:read", s); err != nil {
		return nil, err
	}
	return l.st.ListSecretNames(ctx, kind, id)
}

// RotateSecrets re-seals every value not sealed by the primary key, in one
// transaction; needs secret:rotate on the tree.
func (l *Local) RotateSecrets(ctx context.Context) (int, error) {
	if err := l.check(ctx, "secret:rotate", ""); err != nil {
		return 0, err
	}
	r, err := l.ring()
	if err != nil {
		return 0, err
	}
	return l.st.ResealSecrets(ctx, func(row store.SecretRow) ([]byte, error) {
		if r.Primary(row.Value) {
			return nil, nil
		}
		aad := secrets.AAD(row.ScopeKind, row.ScopeID, row.Name)
		pt, err := r.Open(aad, row.Value)
		if err != nil {
			return nil, err
		}
		return r.Seal(aad, pt)
	})
}

// FolderSecrets opens the secrets a folder inherits: its ancestors' values,
// overridden by deeper folders. Host-internal (turn env); no read API calls it.
func (l *Local) FolderSecrets(ctx context.Context, f string) (map[string]string, error) {
	r, err := l.ring()
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, a := range folder.Ancestors(f) {
		rows, err := l.st.SecretRows(ctx, "folder", a)
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			pt, err := r.Open(secrets.AAD(row.ScopeKind, row.ScopeID, row.Name), row.Value)
			if err != nil {
				return nil, fmt.Errorf("secret folder:%s %s: %w", a, row.Name, err)
			}
			out[row.Name] = string(pt)
		}
	}
	return out, nil
}
