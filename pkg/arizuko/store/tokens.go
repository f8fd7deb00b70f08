package store

import (
	"context"
	"fmt"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// Token is an API token's record; the token itself is never stored.
type Token struct {
	ID        int64  `json:"id"`
	Name      string `json:"name"`
	Kind      string `json:"kind"`
	Platform  string `json:"platform,omitempty"`
	Tenant    string `json:"tenant,omitempty"` // tenant tokens only: the top-level folder
	CreatedBy string `json:"created_by,omitempty"`
	CreatedAt int64  `json:"created_at"`
}

// TokenSum is a token's record with the SHA-256 of its secret.
type TokenSum struct {
	Token
	Sum []byte
}

const tokenCols = `id, name, kind, platform, tenant, created_by, created_at`

func scanToken(sc scanner) (Token, error) {
	var t Token
	err := sc.Scan(&t.ID, &t.Name, &t.Kind, &t.Platform, &t.Tenant, &t.CreatedBy, &t.CreatedAt)
	return t, err
}

// InsertToken stores a token by its sum together with the acl rows and role
// memberships of its principal, in one transaction, so a token never exists
// without them.
func (s *Store) InsertToken(ctx context.Context, t Token, sum []byte, grants []acl.Grant, edges []acl.Edge) (Token, error) {
	err := s.tx(ctx, func(tx conn) error {
		t.CreatedAt = now()
		var err error
		t.ID, err = tx.insertID(ctx, `INSERT INTO api_tokens (name, kind, platform, tenant, sum, created_by, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, t.Name, t.Kind, t.Platform, t.Tenant, sum, t.CreatedBy, t.CreatedAt)
		if s.isUnique(err) {
			return fmt.Errorf("token %q: %w", t.Name, ErrExists)
		}
		if err != nil {
			return err
		}
		for _, g := range grants {
			if _, err := tx.ExecContext(ctx, `INSERT INTO acl (principal, action, scope, effect, params, granted_by, grant_option, created_at)
				VALUES (?, ?, ?, ?, '', ?, ?, ?) ON CONFLICT DO NOTHING`, g.Principal, g.Action, g.Scope, string(g.Effect), g.GrantedBy, g.GrantOption, t.CreatedAt); err != nil {
				return err
			}
		}
		for _, e := range edges {
			if _, err := tx.ExecContext(ctx, `INSERT INTO acl_membership (member, role, granted_by, created_at) VALUES (?, ?, ?, ?)
				ON CONFLICT DO NOTHING`, e.Member, e.Role, t.CreatedBy, t.CreatedAt); err != nil {
				return err
			}
		}
		return nil
	})
	return t, err
}

// ListTokens returns every token's record by id.
func (s *Store) ListTokens(ctx context.Context) ([]Token, error) {
	return queryAll(ctx, s.db, scanToken, `SELECT `+tokenCols+` FROM api_tokens ORDER BY id`)
}

// TokenSums returns every token's record with its sum, for authentication.
func (s *Store) TokenSums(ctx context.Context) ([]TokenSum, error) {
	return queryAll(ctx, s.db, func(sc scanner) (TokenSum, error) {
		var t TokenSum
		err := sc.Scan(&t.ID, &t.Name, &t.Kind, &t.Platform, &t.Tenant, &t.CreatedBy, &t.CreatedAt, &t.Sum)
		return t, err
	}, `SELECT `+tokenCols+`, sum FROM api_tokens ORDER BY id`)
}

// DeleteToken removes a token with every acl row and membership of its
// principal, in one transaction, so a new token of the same name starts clean.
func (s *Store) DeleteToken(ctx context.Context, name, principal string) error {
	return s.tx(ctx, func(tx conn) error {
		if err := affected(tx.ExecContext(ctx, `DELETE FROM api_tokens WHERE name = ?`, name)); err != nil {
			return fmt.Errorf("token %q: %w", name, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM acl WHERE principal = ?`, principal); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `DELETE FROM acl_membership WHERE member = ?`, principal)
		return err
	})
}

// PlatformOutbound returns a platform's pending outbound messages, oldest first.
func (s *Store) PlatformOutbound(ctx context.Context, platform string, limit int) ([]Outbound, error) {
	if limit <= 0 || limit > 1000 {
		limit = 100
	}
	return s.queryOutbound(ctx, `SELECT `+outCols+` FROM messages WHERE direction = 'out' AND status = 'pending' AND platform = ?
		ORDER BY id LIMIT ?`, platform, limit)
}
