package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/crackbox/crackbox/pkg/router"
)

// InsertRoute adds a route and returns it with its id.
func (s *Store) InsertRoute(ctx context.Context, r router.Route) (router.Route, error) {
	res, err := s.db.ExecContext(ctx, `INSERT INTO routes (seq, match, target, created_at) VALUES (?, ?, ?, ?)`, r.Seq, r.Match, r.Target, now())
	if err != nil {
		return r, err
	}
	r.ID, err = res.LastInsertId()
	return r, err
}

// GetRoute returns one route.
func (s *Store) GetRoute(ctx context.Context, id int64) (router.Route, error) {
	var r router.Route
	err := s.db.QueryRowContext(ctx, `SELECT id, seq, match, target FROM routes WHERE id = ?`, id).Scan(&r.ID, &r.Seq, &r.Match, &r.Target)
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("route %d: %w", id, ErrNotFound)
	}
	return r, err
}

// ListRoutes returns routes in resolution order (seq, then id).
func (s *Store) ListRoutes(ctx context.Context) ([]router.Route, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id, seq, match, target FROM routes ORDER BY seq, id`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []router.Route
	for rows.Next() {
		var r router.Route
		if err := rows.Scan(&r.ID, &r.Seq, &r.Match, &r.Target); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// DeleteRoute removes a route.
func (s *Store) DeleteRoute(ctx context.Context, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM routes WHERE id = ?`, id)); err != nil {
		return fmt.Errorf("route %d: %w", id, err)
	}
	return nil
}
