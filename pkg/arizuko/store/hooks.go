package store

import (
	"context"
	"fmt"
)

// Hook is a webhook's record; its token is kept only as a SHA-256.
type Hook struct {
	ID        int64  `json:"id"`
	Folder    string `json:"folder"`
	Signed    bool   `json:"signed"` // a valid X-Hub-Signature-256 is required
	PerMinute int    `json:"per_minute"`
	Owner     string `json:"owner"`
	CreatedAt int64  `json:"created_at"`
}

// HookSecret is a hook with its sealed HMAC secret (nil when unsigned).
type HookSecret struct {
	Hook
	Sealed []byte
}

const hookCols = `id, folder, secret IS NOT NULL, per_minute, owner, created_at`

func scanHook(sc scanner) (Hook, error) {
	var h Hook
	err := sc.Scan(&h.ID, &h.Folder, &h.Signed, &h.PerMinute, &h.Owner, &h.CreatedAt)
	return h, err
}

// InsertHook stores a hook by the sum of its token.
func (s *Store) InsertHook(ctx context.Context, h Hook, sum, sealed []byte) (Hook, error) {
	h.CreatedAt, h.Signed = now(), sealed != nil
	var err error
	h.ID, err = s.db.insertID(ctx, `INSERT INTO hooks (folder, sum, secret, per_minute, owner, created_at) VALUES (?, ?, ?, ?, ?, ?)`,
		h.Folder, sum, sealed, h.PerMinute, h.Owner, h.CreatedAt)
	if s.isForeignKey(err) {
		return h, fmt.Errorf("folder %q: %w", h.Folder, ErrNotFound)
	}
	return h, err
}

// ListHooks returns every hook by id.
func (s *Store) ListHooks(ctx context.Context) ([]Hook, error) {
	return queryAll(ctx, s.db, scanHook, `SELECT `+hookCols+` FROM hooks ORDER BY id`)
}

// GetHook returns one hook.
func (s *Store) GetHook(ctx context.Context, id int64) (Hook, error) {
	h, err := scanHook(s.db.QueryRowContext(ctx, `SELECT `+hookCols+` FROM hooks WHERE id = ?`, id))
	return h, notFound(err, fmt.Sprintf("hook %d", id))
}

// HookBySum returns the hook whose token has this SHA-256, with its sealed secret.
func (s *Store) HookBySum(ctx context.Context, sum []byte) (HookSecret, error) {
	var h HookSecret
	err := s.db.QueryRowContext(ctx, `SELECT `+hookCols+`, secret FROM hooks WHERE sum = ?`, sum).
		Scan(&h.ID, &h.Folder, &h.Signed, &h.PerMinute, &h.Owner, &h.CreatedAt, &h.Sealed)
	return h, notFound(err, "hook")
}

// DeleteHook revokes a hook at once.
func (s *Store) DeleteHook(ctx context.Context, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM hooks WHERE id = ?`, id)); err != nil {
		return fmt.Errorf("hook %d: %w", id, err)
	}
	return nil
}
