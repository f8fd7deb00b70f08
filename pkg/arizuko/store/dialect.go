package store

import (
	"database/sql"
	"errors"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"
)

// dialect is everything that differs between SQLite and PostgreSQL. Queries are written
// once, with ? placeholders and SQL both engines run (ON CONFLICT, RETURNING); the rest
// of the package never asks which engine it talks to.
type dialect struct {
	name   string
	driver string // database/sql driver name
	// dollar: placeholders are $1, $2… instead of ?.
	dollar bool
	// strictText: text holds neither NUL nor invalid UTF-8 (PostgreSQL). SQLite stores
	// any bytes; here string arguments are written with U+FFFD in place of those, so no
	// input — a hostile guest's output in a turn's error included — makes a write fail.
	strictText bool
	// greatest is the two-argument maximum: SQLite's scalar MAX, PostgreSQL's GREATEST.
	greatest string
	// txOptions: SQLite serializes writers itself (_txlock=immediate and a busy
	// timeout); PostgreSQL gets the same guarantee from SERIALIZABLE plus a retry.
	txOptions *sql.TxOptions
	// schemaVersion creates the migrations' own table.
	schemaVersion string
	// hasSchema is a query answering whether schema_version exists; only asked of
	// PostgreSQL, since a SQLite file that is not there says so itself.
	hasSchema string
	// lockMessages, run first in a transaction that adds messages, keeps every other
	// message writer out until it ends, so ids become visible in the order they are
	// given out (readers page by id > cursor). SQLite's writers are one at a time anyway.
	lockMessages string
	// lockSchema keeps two processes from migrating the same database at once.
	lockSchema string
	// claim is a query taking the store for one daemon, answering false when another
	// holds it; "" where the data dir's lock file already covers it (SQLite).
	claim string
	// unclaim releases the claim at once. Closing the connection would too, but only
	// once the server's backend has exited, which a daemon restarted right away races.
	unclaim string
	// code classifies an engine error.
	code func(error) errCode
}

// errCode is an engine error reduced to what the store branches on.
type errCode int

const (
	codeOther      errCode = iota
	codeUnique             // UNIQUE or PRIMARY KEY violation
	codeForeignKey         // FOREIGN KEY violation
	codeRetry              // the transaction lost a race; running it again may succeed
)

var sqliteDialect = &dialect{
	name:     "sqlite",
	driver:   "sqlite",
	greatest: "MAX",
	schemaVersion: `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
	code: func(err error) errCode {
		var coded interface{ Code() int }
		if !errors.As(err, &coded) {
			return codeOther
		}
		// Extended result codes: SQLITE_CONSTRAINT_UNIQUE, _PRIMARYKEY, _FOREIGNKEY.
		switch coded.Code() {
		case 2067, 1555:
			return codeUnique
		case 787:
			return codeForeignKey
		}
		return codeOther
	},
}

var postgresDialect = &dialect{
	name:       "postgres",
	driver:     "pgx",
	dollar:     true,
	strictText: true,
	greatest:   "GREATEST",
	txOptions:  &sql.TxOptions{Isolation: sql.LevelSerializable},
	schemaVersion: `CREATE TABLE IF NOT EXISTS schema_version (
		version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`,
	hasSchema: `SELECT to_regclass('schema_version') IS NOT NULL`,
	// Before any query, so the SERIALIZABLE snapshot is taken once the lock is held.
	lockMessages: `LOCK TABLE messages IN SHARE ROW EXCLUSIVE MODE`,
	lockSchema:   `LOCK TABLE schema_version IN EXCLUSIVE MODE`,
	// A session lock: held while the claiming connection lives, released if it dies.
	claim:   `SELECT pg_try_advisory_lock(7480)`,
	unclaim: `SELECT pg_advisory_unlock(7480)`,
	code: func(err error) errCode {
		var pe *pgconn.PgError
		if !errors.As(err, &pe) {
			return codeOther
		}
		switch pe.Code {
		case "23505": // unique_violation
			return codeUnique
		case "23503": // foreign_key_violation
			return codeForeignKey
		case "40001", "40P01": // serialization_failure, deadlock_detected
			return codeRetry
		}
		return codeOther
	},
}

// args returns the query arguments the engine accepts; see strictText.
func (d *dialect) args(args []any) []any {
	if !d.strictText {
		return args
	}
	var out []any // copied on the first change only
	for i, a := range args {
		s, ok := a.(string)
		if !ok || utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
			continue
		}
		if out == nil {
			out = slices.Clone(args)
		}
		out[i] = strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
	}
	if out == nil {
		return args
	}
	return out
}

// rebind rewrites ? placeholders outside string literals as $1, $2… when the engine
// wants those.
func (d *dialect) rebind(q string) string {
	if !d.dollar || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n, quoted := 0, false
	for i := 0; i < len(q); i++ {
		c := q[i]
		switch {
		case c == '\'':
			quoted = !quoted
		case c == '?' && !quoted:
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}
