// Package store is arizuko's database: by default SQLite, one file under the data dir
// (WAL, foreign keys), or PostgreSQL named by a URL for a control plane that outgrows
// one host. Both run the same embedded numbered migrations, each written in its
// dialect, behind one API. It is the only package that speaks SQL.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sentinel errors callers branch on.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrConflict      = errors.New("conflict")
	ErrSchemaTooNew  = errors.New("database schema is newer than this binary")
	ErrMigrationFile = errors.New("bad migration file name")
	ErrBadURL        = errors.New("bad store URL")
	ErrUnreachable   = errors.New("store unreachable")
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// loadMigrations reads one dialect's migrations, in version order.
func loadMigrations(d *dialect) ([]migration, error) {
	dir := "migrations/" + d.name
	entries, err := fs.ReadDir(migrationFS, dir)
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("%s: %w", e.Name(), ErrMigrationFile)
		}
		body, err := fs.ReadFile(migrationFS, dir+"/"+e.Name())
		if err != nil {
			return nil, err
		}
		out = append(out, migration{v, e.Name(), string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].version < out[j].version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("%s: versions must run 1, 2, 3… without gaps: %w", m.name, ErrMigrationFile)
		}
	}
	return out, nil
}

// LatestVersion is the schema version this binary migrates to.
func LatestVersion() int {
	ms, err := loadMigrations(sqliteDialect)
	if err != nil {
		panic(err) // embedded at build time; a test covers it
	}
	return len(ms)
}

// Store wraps the database handle.
type Store struct {
	sql   *sql.DB
	db    conn
	d     *dialect
	path  string    // the SQLite file; "" for PostgreSQL
	claim *sql.Conn // holds Claim's lock until Close
	log   *slog.Logger
}

// newStore wraps db; a nil log discards.
func newStore(db *sql.DB, d *dialect, log *slog.Logger) *Store {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Store{sql: db, db: conn{db, d}, d: d, log: log}
}

// Close closes the database, releasing a Claim.
func (s *Store) Close() error {
	if s.claim != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if _, err := s.claim.ExecContext(ctx, s.d.unclaim); err != nil {
			s.log.Warn("store claim not released; it ends with the connection", "err", err)
		}
		cancel()
		s.claim.Close()
		s.claim = nil
	}
	return s.sql.Close()
}

// ErrClaimed is a store another daemon runs on.
var ErrClaimed = errors.New("store is in use by another arizuko serve")

// Claim takes the store for this daemon until Close: two daemons on one database
// would both run every folder's turns and answer each message twice. A SQLite file
// needs no claim; the data dir's lock covers it.
func (s *Store) Claim(ctx context.Context) error {
	if s.d.claim == "" || s.claim != nil {
		return nil
	}
	c, err := s.sql.Conn(ctx)
	if err != nil {
		return err
	}
	// A daemon that was killed holds the claim until the server notices its
	// connection is gone, a moment after the process ends; a restart within that
	// moment must not be refused.
	deadline := time.Now().Add(claimWait)
	for {
		var ok bool
		if err := c.QueryRowContext(ctx, s.d.claim).Scan(&ok); err != nil {
			c.Close()
			return err
		}
		if ok {
			s.claim = c
			return nil
		}
		if time.Now().After(deadline) {
			c.Close()
			return fmt.Errorf("%w: stop it first, or give this one its own database", ErrClaimed)
		}
		select {
		case <-ctx.Done():
			c.Close()
			return ctx.Err()
		case <-time.After(claimWait / 20):
		}
	}
}

// claimWait is how long Claim waits for a holder that is going away.
const claimWait = 2 * time.Second

// Dialect names the engine: "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.name }

// Path is the SQLite database file; "" for PostgreSQL.
func (s *Store) Path() string { return s.path }

// Version returns the highest applied migration.
func (s *Store) Version(ctx context.Context) (int, error) {
	var v int
	err := s.db.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v)
	return v, err
}

// migrate applies every migration above the current version, each in its own
// transaction together with its schema_version row. upTo > 0 stops early (tests).
func (s *Store) migrate(ctx context.Context, upTo int) error {
	ms, err := loadMigrations(s.d)
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, s.d.schemaVersion); err != nil {
		return fmt.Errorf("schema_version: %w", err)
	}
	cur, err := s.Version(ctx)
	if err != nil {
		return err
	}
	if cur > len(ms) {
		return fmt.Errorf("schema version %d, this binary knows up to %d; run a newer arizuko or restore a backup: %w", cur, len(ms), ErrSchemaTooNew)
	}
	for _, m := range ms {
		if m.version <= cur || (upTo > 0 && m.version > upTo) {
			continue
		}
		applied := false
		err := s.tx(ctx, func(tx conn) error {
			// Another process may be migrating the same database: one at a time, and
			// a version it applied meanwhile is skipped.
			if err := tx.lock(ctx, s.d.lockSchema); err != nil {
				return err
			}
			var v int
			if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
				return err
			}
			if applied = v < m.version; !applied {
				return nil
			}
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`, m.version, m.name, now())
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		if applied {
			s.log.Info("store migrated", "version", m.version, "name", m.name)
		}
	}
	return nil
}

// txAttempts bounds the runs of one transaction that keeps losing races.
const txAttempts = 10

// tx runs fn in a transaction. A transaction PostgreSQL aborts because a concurrent
// one won (SERIALIZABLE) runs again, as a SQLite writer would have waited its turn;
// fn must therefore only set its results, never accumulate them. One that keeps
// losing is ErrConflict.
func (s *Store) tx(ctx context.Context, fn func(conn) error) error {
	var err error
	for attempt := 1; attempt <= txAttempts; attempt++ {
		if err = s.tx1(ctx, fn); err == nil || s.d.code(err) != codeRetry {
			return err
		}
		backoff := time.Duration(attempt) * time.Duration(2+rand.IntN(8)) * time.Millisecond
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
	return fmt.Errorf("%w: gave up after %d attempts: %w", ErrConflict, txAttempts, err)
}

func (s *Store) tx1(ctx context.Context, fn func(conn) error) error {
	tx, err := s.sql.BeginTx(ctx, s.d.txOptions)
	if err != nil {
		return err
	}
	if err := fn(conn{tx, s.d}); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func now() int64 { return time.Now().UnixMilli() }

// isUnique reports a UNIQUE or PRIMARY KEY constraint violation.
func (s *Store) isUnique(err error) bool { return err != nil && s.d.code(err) == codeUnique }

// isForeignKey reports a FOREIGN KEY constraint violation.
func (s *Store) isForeignKey(err error) bool { return err != nil && s.d.code(err) == codeForeignKey }

// affected turns "no row changed" into ErrNotFound.
func affected(res sql.Result, err error) error {
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n == 0 {
		return ErrNotFound
	}
	return nil
}
