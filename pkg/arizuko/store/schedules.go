package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Schedule is a cron schedule that injects a turn into its folder.
type Schedule struct {
	ID        int64  `json:"id"`
	Folder    string `json:"folder"`
	Cron      string `json:"cron"`
	TZ        string `json:"tz"`
	Prompt    string `json:"prompt"`
	NextRun   int64  `json:"next_run"`           // unix ms
	LastRun   int64  `json:"last_run,omitempty"` // unix ms of the last firing's due time
	Owner     string `json:"owner"`
	CreatedAt int64  `json:"created_at"`
}

const scheduleCols = `id, folder, cron, tz, prompt, next_run, last_run, owner, created_at`

func scanSchedule(sc scanner) (Schedule, error) {
	var s Schedule
	err := sc.Scan(&s.ID, &s.Folder, &s.Cron, &s.TZ, &s.Prompt, &s.NextRun, &s.LastRun, &s.Owner, &s.CreatedAt)
	return s, err
}

// notFound names what a missing row was.
func notFound(err error, what string) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%s: %w", what, ErrNotFound)
	}
	return err
}

// InsertSchedule stores a schedule.
func (s *Store) InsertSchedule(ctx context.Context, sc Schedule) (Schedule, error) {
	sc.CreatedAt = now()
	var err error
	sc.ID, err = s.db.insertID(ctx, `INSERT INTO schedules (folder, cron, tz, prompt, next_run, owner, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		sc.Folder, sc.Cron, sc.TZ, sc.Prompt, sc.NextRun, sc.Owner, sc.CreatedAt)
	if s.isForeignKey(err) {
		return sc, fmt.Errorf("folder %q: %w", sc.Folder, ErrNotFound)
	}
	return sc, err
}

// ListSchedules returns every schedule by id.
func (s *Store) ListSchedules(ctx context.Context) ([]Schedule, error) {
	return queryAll(ctx, s.db, scanSchedule, `SELECT `+scheduleCols+` FROM schedules ORDER BY id`)
}

// DueSchedules returns the schedules whose next run is at or before at (unix ms).
func (s *Store) DueSchedules(ctx context.Context, at int64) ([]Schedule, error) {
	return queryAll(ctx, s.db, scanSchedule, `SELECT `+scheduleCols+` FROM schedules WHERE next_run <= ? ORDER BY next_run, id`, at)
}

// NextScheduleRun is the earliest next run of any schedule; ok is false when there is none.
func (s *Store) NextScheduleRun(ctx context.Context) (at int64, ok bool, err error) {
	var v sql.NullInt64
	err = s.db.QueryRowContext(ctx, `SELECT MIN(next_run) FROM schedules`).Scan(&v)
	return v.Int64, v.Valid, err
}

// GetSchedule returns one schedule.
func (s *Store) GetSchedule(ctx context.Context, id int64) (Schedule, error) {
	sc, err := scanSchedule(s.db.QueryRowContext(ctx, `SELECT `+scheduleCols+` FROM schedules WHERE id = ?`, id))
	return sc, notFound(err, fmt.Sprintf("schedule %d", id))
}

// AdvanceSchedule moves a schedule's next run from due to next and records
// due as its last run, only if its next run is still due: of two control
// planes sharing the store, exactly one wins a due time.
func (s *Store) AdvanceSchedule(ctx context.Context, id, due, next int64) (bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE schedules SET next_run = ?, last_run = ? WHERE id = ? AND next_run = ?`, next, due, id, due)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}

// DeleteSchedule removes a schedule at once.
func (s *Store) DeleteSchedule(ctx context.Context, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `DELETE FROM schedules WHERE id = ?`, id)); err != nil {
		return fmt.Errorf("schedule %d: %w", id, err)
	}
	return nil
}
