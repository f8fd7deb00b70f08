package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// connectTimeout bounds the first connection when the URL sets no connect_timeout, so a
// wrong host fails the start instead of hanging it.
const connectTimeout = 15 * time.Second

// maxConns bounds the connections one store holds open.
const maxConns = 16

// OpenURL opens the PostgreSQL database a store URL names (postgres://… or
// postgresql://…, with any parameter pgx accepts) and migrates it to the latest version.
// Unless create is set, a database without arizuko's schema is ErrNotFound: a typo in
// the database name must not start an empty control plane. log (nil discards) hears
// of the open and of migrations.
func OpenURL(ctx context.Context, raw string, create bool, log *slog.Logger) (*Store, error) {
	return openPostgres(ctx, raw, create, 0, log)
}

func openPostgres(ctx context.Context, raw string, create bool, upTo int, log *slog.Logger) (*Store, error) {
	cfg, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	db, err := sql.Open(postgresDialect.driver, raw)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w: %v", Redact(raw), ErrBadURL, err)
	}
	// A busy daemon must not take every connection the server has (100 by default).
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := newStore(db, postgresDialect, log)
	if err := s.startPostgres(ctx, cfg, Redact(raw), create, upTo); err != nil {
		db.Close()
		return nil, err
	}
	return s, nil
}

func (s *Store) startPostgres(ctx context.Context, cfg *pgconn.Config, where string, create bool, upTo int) error {
	pctx := ctx
	if cfg.ConnectTimeout == 0 {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, connectTimeout)
		defer cancel()
	}
	if err := s.sql.PingContext(pctx); err != nil {
		return fmt.Errorf("store %s: %w: %v; check that PostgreSQL runs there and that the URL's host, port, user, password "+
			"and database are right (or leave --store unset for SQLite in the data dir)", where, ErrUnreachable, err)
	}
	if !create {
		var ok bool
		if err := s.db.QueryRowContext(ctx, s.d.hasSchema).Scan(&ok); err != nil {
			return fmt.Errorf("store %s: %w", where, err)
		}
		if !ok {
			return fmt.Errorf("store %s has no arizuko schema; run `arizuko init --store URL` first (same URL): %w", where, ErrNotFound)
		}
	}
	warnPlaintext(cfg, where, s.log)
	if err := s.migrate(ctx, upTo); err != nil {
		return fmt.Errorf("store %s: %w", where, err)
	}
	s.log.Info("store opened", "dialect", s.d.name, "store", where)
	return nil
}

const wantURL = "want postgres://user@host:5432/dbname (SQLite needs no --store: it is the data dir's arizuko.db)"

// parseURL refuses what is not a PostgreSQL URL pgx can parse, naming the fix.
func parseURL(raw string) (*pgconn.Config, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("store URL does not parse (not shown, it may hold a password): %w: %s", ErrBadURL, wantURL)
	}
	if u.Scheme != "postgres" && u.Scheme != "postgresql" {
		return nil, fmt.Errorf("store %q: %w: scheme %q is not postgres or postgresql; %s", Redact(raw), ErrBadURL, u.Scheme, wantURL)
	}
	cfg, err := pgconn.ParseConfig(raw)
	if err != nil {
		return nil, fmt.Errorf("store %s: %w: %v", Redact(raw), ErrBadURL, redactErr(err, raw))
	}
	return cfg, nil
}

// warnPlaintext says so when the connection to a remote server is not verified TLS:
// messages and sealed secrets cross it.
func warnPlaintext(cfg *pgconn.Config, where string, log *slog.Logger) {
	if strings.HasPrefix(cfg.Host, "/") || cfg.Host == "localhost" {
		return
	}
	if ip, err := netip.ParseAddr(cfg.Host); err == nil && ip.IsLoopback() {
		return
	}
	if cfg.TLSConfig == nil || cfg.TLSConfig.InsecureSkipVerify {
		log.Warn("store connection is not verified TLS; add sslmode=verify-full to the URL", "store", where)
	}
}

// Redact is raw with any password (in the user info or a password parameter) hidden,
// fit for logs and errors.
func Redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparsable URL)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactErr keeps a parse error from echoing the password back.
func redactErr(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil {
		return errors.New("unparsable URL")
	}
	msg := err.Error()
	if p, ok := u.User.Password(); ok && p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	if p := u.Query().Get("password"); p != "" {
		msg = strings.ReplaceAll(msg, p, "xxxxx")
	}
	return errors.New(msg)
}
