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
	var err error
	r.ID, err = s.db.insertID(ctx, `INSERT INTO routes (seq, match, target, created_by, created_at) VALUES (?, ?, ?, ?, ?)`, r.Seq, r.Match, r.Target, r.Owner, now())
	return r, err
}

const routeCols = `id, seq, match, target, created_by`

func scanRoute(sc scanner) (router.Route, error) {
	var r router.Route
	err := sc.Scan(&r.ID, &r.Seq, &r.Match, &r.Target, &r.Owner)
	return r, err
}

// GetRoute returns one route.
func (s *Store) GetRoute(ctx context.Context, id int64) (router.Route, error) {
	r, err := scanRoute(s.db.QueryRowContext(ctx, `SELECT `+routeCols+` FROM routes WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("route %d: %w", id, ErrNotFound)
	}
	return r, err
}

// ListRoutes returns routes in resolution order (seq, then id).
func (s *Store) ListRoutes(ctx context.Context) ([]router.Route, error) {
	return queryAll(ctx, s.db, scanRoute, `SELECT `+routeCols+` FROM routes ORDER BY seq, id`)
}

// DeleteRoute removes a route.
func (s *Store) DeleteRoute(ctx context.Context, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM routes WHERE id = ?`, id)); err != nil {
		return fmt.Errorf("route %d: %w", id, err)
	}
	return nil
}
