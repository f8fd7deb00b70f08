package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// SecretRow is a sealed secret; Value never leaves the daemon through an API.
type SecretRow struct {
	ScopeKind string
	ScopeID   string
	Name      string
	Value     []byte
	UpdatedAt int64
}

// SecretName is what read APIs may show.
type SecretName struct {
	ScopeKind string `json:"scope_kind"`
	ScopeID   string `json:"scope_id"`
	Name      string `json:"name"`
	UpdatedAt int64  `json:"updated_at"`
}

// KeyCheckKind is the scope kind of the one row sealed only to prove, at
// start, that the configured key ring opens this store. Listings skip it.
const KeyCheckKind = "keycheck"

// KeyCheck returns the sealed key-check value, ErrNotFound when none is stored.
func (s *Store) KeyCheck(ctx context.Context) ([]byte, error) {
	var v []byte
	err := s.db.QueryRowContext(ctx, `SELECT value FROM secrets WHERE scope_kind = ? AND scope_id = '' AND name = ''`, KeyCheckKind).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("key check: %w", ErrNotFound)
	}
	return v, err
}

// PutKeyCheck stores the sealed key-check value.
func (s *Store) PutKeyCheck(ctx context.Context, v []byte) error {
	return s.PutSecret(ctx, SecretRow{ScopeKind: KeyCheckKind, Value: v})
}

// PutSecret inserts or replaces a sealed value.
func (s *Store) PutSecret(ctx context.Context, r SecretRow) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO secrets (scope_kind, scope_id, name, value, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (scope_kind, scope_id, name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		r.ScopeKind, r.ScopeID, r.Name, r.Value, now())
	return err
}

// DeleteSecret removes one secret.
func (s *Store) DeleteSecret(ctx context.Context, kind, id, name string) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM secrets WHERE scope_kind = ? AND scope_id = ? AND name = ?`, kind, id, name)); err != nil {
		return fmt.Errorf("secret %s:%s %s: %w", kind, id, name, err)
	}
	return nil
}

// ListSecretNames lists names for one scope, or every scope when kind is "".
func (s *Store) ListSecretNames(ctx context.Context, kind, id string) ([]SecretName, error) {
	rows, err := s.secretRows(ctx, kind, id)
	if err != nil {
		return nil, err
	}
	out := make([]SecretName, 0, len(rows))
	for _, r := range rows {
		out = append(out, SecretName{r.ScopeKind, r.ScopeID, r.Name, r.UpdatedAt})
	}
	return out, nil
}

// SecretRows returns sealed rows for one scope (kind, id), or all when kind is "".
func (s *Store) SecretRows(ctx context.Context, kind, id string) ([]SecretRow, error) {
	return s.secretRows(ctx, kind, id)
}

func (s *Store) secretRows(ctx context.Context, kind, id string) ([]SecretRow, error) {
	q := `SELECT ` + secretCols + ` FROM secrets WHERE scope_kind != '` + KeyCheckKind + `'`
	var args []any
	if kind != "" {
		q += ` AND scope_kind = ? AND scope_id = ?`
		args = []any{kind, id}
	}
	return queryAll(ctx, s.db, scanSecret, q+` ORDER BY scope_kind, scope_id, name`, args...)
}

const secretCols = `scope_kind, scope_id, name, value, updated_at`

func scanSecret(sc scanner) (SecretRow, error) {
	var r SecretRow
	err := sc.Scan(&r.ScopeKind, &r.ScopeID, &r.Name, &r.Value, &r.UpdatedAt)
	return r, err
}

// ResealSecrets rewrites every row through fn in one transaction; fn returns
// the new value, or nil to leave the row alone. Either every row is resealed
// or none is.
func (s *Store) ResealSecrets(ctx context.Context, fn func(SecretRow) ([]byte, error)) (int, error) {
	n := 0
	err := s.tx(ctx, func(tx conn) error {
		n = 0 // a retried transaction counts afresh
		all, err := queryAll(ctx, tx, scanSecret, `SELECT `+secretCols+` FROM secrets`)
		if err != nil {
			return err
		}
		for _, r := range all {
			v, err := fn(r)
			if err != nil {
				return fmt.Errorf("secret %s:%s %s: %w", r.ScopeKind, r.ScopeID, r.Name, err)
			}
			if v == nil {
				continue
			}
			if _, err := tx.ExecContext(ctx, `UPDATE secrets SET value = ? WHERE scope_kind = ? AND scope_id = ? AND name = ?`,
				v, r.ScopeKind, r.ScopeID, r.Name); err != nil {
				return err
			}
			if r.ScopeKind != KeyCheckKind {
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
