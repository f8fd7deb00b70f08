// Package store is arizuko's SQLite database: one file under the data dir,
// WAL, foreign keys, embedded numbered migrations. It is the only package
// that speaks SQL.
package store

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Sentinel errors callers branch on.
var (
	ErrNotFound      = errors.New("not found")
	ErrExists        = errors.New("already exists")
	ErrConflict      = errors.New("conflict")
	ErrSchemaTooNew  = errors.New("database schema is newer than this binary")
	ErrMigrationFile = errors.New("bad migration file name")
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
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
		body, err := fs.ReadFile(migrationFS, "migrations/"+e.Name())
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
	ms, err := loadMigrations()
	if err != nil {
		panic(err) // embedded at build time; a test covers it
	}
	return len(ms)
}

// Store wraps the database handle.
type Store struct {
	db   *sql.DB
	path string
}

// DSN returns the connection string for path: foreign keys, WAL, a busy
// timeout, FULL sync so a commit survives power loss, and immediate write
// transactions so concurrent writers queue instead of failing to upgrade.
func DSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout(5000)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Set("_txlock", "immediate")
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path and migrates it to
// the latest version.
func Open(ctx context.Context, path string) (*Store, error) {
	return open(ctx, path, 0)
}

func open(ctx context.Context, path string, upTo int) (*Store, error) {
	db, err := sql.Open("sqlite", DSN(path))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := &Store{db: db, path: path}
	if err := s.migrate(ctx, upTo); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Path is the database file.
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
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`); err != nil {
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
		err := s.tx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, m.sql); err != nil {
				return err
			}
			_, err := tx.ExecContext(ctx, `INSERT INTO schema_version (version, name, applied_at) VALUES (?, ?, ?)`, m.version, m.name, now())
			return err
		})
		if err != nil {
			return fmt.Errorf("migration %s: %w", m.name, err)
		}
		slog.Info("store migrated", "version", m.version, "name", m.name)
	}
	return nil
}

func (s *Store) tx(ctx context.Context, fn func(*sql.Tx) error) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

func now() int64 { return time.Now().UnixMilli() }

// isUnique reports a UNIQUE or PRIMARY KEY constraint violation.
func isUnique(err error) bool {
	var coded interface{ Code() int }
	if !errors.As(err, &coded) {
		return false
	}
	const constraintUnique, constraintPrimaryKey = 2067, 1555
	return coded.Code() == constraintUnique || coded.Code() == constraintPrimaryKey
}

// isForeignKey reports a FOREIGN KEY constraint violation.
func isForeignKey(err error) bool {
	var coded interface{ Code() int }
	const constraintForeignKey = 787
	return errors.As(err, &coded) && coded.Code() == constraintForeignKey
}

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
