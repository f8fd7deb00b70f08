package store

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/url"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

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

// Open opens (creating if needed) the SQLite database at path and migrates it
// to the latest version; log (nil discards) hears of migrations.
func Open(ctx context.Context, path string, log *slog.Logger) (*Store, error) {
	return openSQLite(ctx, path, 0, log)
}

func openSQLite(ctx context.Context, path string, upTo int, log *slog.Logger) (*Store, error) {
	db, err := sql.Open(sqliteDialect.driver, DSN(path))
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	s := newStore(db, sqliteDialect, log)
	s.path = path
	if err := s.migrate(ctx, upTo); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", path, err)
	}
	return s, nil
}
