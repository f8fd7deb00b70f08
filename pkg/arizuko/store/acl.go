package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// InsertGrant adds an acl row and returns it with its id.
func (s *Store) InsertGrant(ctx context.Context, g acl.Grant) (acl.Grant, error) {
	id, err := s.db.insertID(ctx, `INSERT INTO acl (principal, action, scope, effect, params, granted_by, grant_option, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, g.Principal, g.Action, g.Scope, string(g.Effect), g.Params, g.GrantedBy, g.GrantOption, now())
	if s.isUnique(err) {
		return g, fmt.Errorf("grant %s %s %s %s: %w", g.Principal, g.Effect, g.Action, g.Scope, ErrExists)
	}
	g.ID = id
	return g, err
}

const grantCols = `id, principal, action, scope, effect, params, granted_by, grant_option`

func scanGrant(sc scanner) (acl.Grant, error) {
	var g acl.Grant
	var eff string
	err := sc.Scan(&g.ID, &g.Principal, &g.Action, &g.Scope, &eff, &g.Params, &g.GrantedBy, &g.GrantOption)
	g.Effect = acl.Effect(eff)
	return g, err
}

// GetGrant returns one acl row.
func (s *Store) GetGrant(ctx context.Context, id int64) (acl.Grant, error) {
	g, err := scanGrant(s.db.QueryRowContext(ctx, `SELECT `+grantCols+` FROM acl WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return g, fmt.Errorf("grant %d: %w", id, ErrNotFound)
	}
	return g, err
}

// ListGrants returns acl rows by id, all of them or one principal's.
func (s *Store) ListGrants(ctx context.Context, principal string) ([]acl.Grant, error) {
	q, args := `SELECT `+grantCols+` FROM acl ORDER BY id`, []any{}
	if principal != "" {
		q, args = `SELECT `+grantCols+` FROM acl WHERE principal = ? ORDER BY id`, []any{principal}
	}
	return queryAll(ctx, s.db, scanGrant, q, args...)
}

// DeleteGrant removes an acl row.
func (s *Store) DeleteGrant(ctx context.Context, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM acl WHERE id = ?`, id)); err != nil {
		return fmt.Errorf("grant %d: %w", id, err)
	}
	return nil
}

// InsertEdge makes member hold role's rows.
func (s *Store) InsertEdge(ctx context.Context, e acl.Edge, grantedBy string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO acl_membership (member, role, granted_by, created_at) VALUES (?, ?, ?, ?)`,
		e.Member, e.Role, grantedBy, now())
	if s.isUnique(err) {
		return fmt.Errorf("%s in %s: %w", e.Member, e.Role, ErrExists)
	}
	return err
}

// DeleteEdge removes a membership edge.
func (s *Store) DeleteEdge(ctx context.Context, e acl.Edge) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM acl_membership WHERE member = ? AND role = ?`, e.Member, e.Role)); err != nil {
		return fmt.Errorf("%s in %s: %w", e.Member, e.Role, err)
	}
	return nil
}

// ListEdges returns every membership edge.
func (s *Store) ListEdges(ctx context.Context) ([]acl.Edge, error) {
	return queryAll(ctx, s.db, func(sc scanner) (acl.Edge, error) {
		var e acl.Edge
		err := sc.Scan(&e.Member, &e.Role)
		return e, err
	}, `SELECT member, role FROM acl_membership ORDER BY member, role`)
}

// Policy loads every row and edge into an evaluator snapshot.
func (s *Store) Policy(ctx context.Context) (*acl.Policy, error) {
	rows, err := s.ListGrants(ctx, "")
	if err != nil {
		return nil, err
	}
	edges, err := s.ListEdges(ctx)
	if err != nil {
		return nil, err
	}
	return acl.NewPolicy(rows, edges), nil
}

// AuditEntry is one audit_log row.
type AuditEntry struct {
	ID        int64  `json:"id"`
	At        int64  `json:"at"`
	Principal string `json:"principal"`
	Action    string `json:"action"`
	Scope     string `json:"scope"`
	Decision  string `json:"decision"`
	Reason    string `json:"reason"`
}

// Audit records a decision.
func (s *Store) Audit(ctx context.Context, d acl.Decision) error {
	dec := "deny"
	if d.Allow {
		dec = "allow"
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO audit_log (at, principal, action, scope, decision, reason) VALUES (?, ?, ?, ?, ?, ?)`,
		now(), d.Principal, d.Action, d.Scope, dec, d.Reason)
	return err
}

// ListAudit returns the newest entries first.
func (s *Store) ListAudit(ctx context.Context, limit int) ([]AuditEntry, error) {
	if limit <= 0 {
		limit = 100
	}
	return queryAll(ctx, s.db, func(sc scanner) (AuditEntry, error) {
		var a AuditEntry
		err := sc.Scan(&a.ID, &a.At, &a.Principal, &a.Action, &a.Scope, &a.Decision, &a.Reason)
		return a, err
	}, `SELECT id, at, principal, action, scope, decision, reason FROM audit_log ORDER BY id DESC LIMIT ?`, limit)
}
