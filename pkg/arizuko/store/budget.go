package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// TurnBudget returns the folder's own turns-per-day cap; set is false when
// the folder uses the instance default.
func (s *Store) TurnBudget(ctx context.Context, folder string) (n int, set bool, err error) {
	var v sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT max_turns_per_day FROM folders WHERE path = ?`, folder).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, fmt.Errorf("folder %q: %w", folder, ErrNotFound)
	}
	return int(v.Int64), v.Valid, err
}

// SetTurnBudget gives the folder its own cap (n >= 0, 0 = unlimited), or
// returns it to the instance default (n < 0).
func (s *Store) SetTurnBudget(ctx context.Context, folder string, n int) error {
	var v any
	if n >= 0 {
		v = n
	}
	if err := affected(s.db.ExecContext(ctx, `UPDATE folders SET max_turns_per_day = ? WHERE path = ?`, v, folder)); err != nil {
		return fmt.Errorf("folder %q: %w", folder, err)
	}
	return nil
}

// TurnsStartedSince counts the folder's turns, other than exclude, that
// started a guest at or after sinceMillis. A turn refused by its budget
// never starts, so it does not count against the next one.
func (s *Store) TurnsStartedSince(ctx context.Context, folder string, sinceMillis, exclude int64) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM turns WHERE folder = ? AND started_at >= ? AND started_at > 0 AND id != ?`,
		folder, sinceMillis, exclude).Scan(&n)
	return n, err
}

// SetChatPlatform points a chat's outbound messages at platform's adapter:
// the adapter that last spoke in a chat is the one that hears the reply.
func (s *Store) SetChatPlatform(ctx context.Context, jid, platform string) error {
	_, err := s.db.ExecContext(ctx, `UPDATE chats SET platform = ? WHERE jid = ? AND platform != ?`, platform, jid, platform)
	return err
}
