package store

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/pgtest"
)

// closedPort is a loopback port nothing listens on.
func closedPort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	return port
}

// A bad store URL is refused with an error naming it and the fix, never echoing a
// password.
func TestOpenURLRefuses(t *testing.T) {
	port := closedPort(t)
	for _, c := range []struct {
		name, url string
		want      error
		says      []string
	}{
		{"unknown scheme", "mysql://u:s3cret@db/arizuko", ErrBadURL, []string{`"mysql"`, "postgres://", "mysql://u:xxxxx@db/arizuko"}},
		{"a file path", "/var/lib/arizuko/arizuko.db", ErrBadURL, []string{"/var/lib/arizuko/arizuko.db", "data dir"}},
		{"unparsable", "postgres://u:s3cret@db:port/x", ErrBadURL, []string{"does not parse", "postgres://"}},
		{"bad parameter", "postgres://u:s3cret@db/x?sslmode=sometimes", ErrBadURL, []string{"sslmode"}},
		{"unreachable", fmt.Sprintf("postgres://u:s3cret@127.0.0.1:%d/x?connect_timeout=5", port), ErrUnreachable,
			[]string{fmt.Sprintf("127.0.0.1:%d", port), "PostgreSQL runs there", "--store"}},
		{"password parameter", fmt.Sprintf("postgres://u@127.0.0.1:%d/x?password=s3cret", port), ErrUnreachable, []string{"password=xxxxx"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := OpenURL(context.Background(), c.url, true, nil)
			if err == nil {
				s.Close()
				t.Fatal("opened")
			}
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
			for _, w := range c.says {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// Without create, a database that never held arizuko is refused (a typo in its name
// must not start an empty control plane); once created it opens.
func TestOpenURLWithoutCreate(t *testing.T) {
	url := pgtest.DB(t)
	ctx := context.Background()
	if _, err := OpenURL(ctx, url, false, nil); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "arizuko init --store") {
		t.Fatalf("open of an empty database = %v, want ErrNotFound naming arizuko init", err)
	}
	s, err := OpenURL(ctx, url, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = OpenURL(ctx, url, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Dialect() != "postgres" || s.Path() != "" {
		t.Fatalf("dialect %q path %q", s.Dialect(), s.Path())
	}
}

// One daemon per PostgreSQL store: a second claim is refused until the first store
// closes.
func TestClaim(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	a, err := OpenURL(ctx, url, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Claim(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := OpenURL(ctx, url, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Claim(ctx); !errors.Is(err, ErrClaimed) {
		t.Fatalf("second claim = %v, want ErrClaimed", err)
	}
	a.Close()
	if err := b.Claim(ctx); err != nil {
		t.Fatalf("claim after the first store closed: %v", err)
	}
}

// A claim whose holder dies, as a killed daemon's connection does a moment after the
// process ends, is taken over by a daemon already waiting for it, not refused.
func TestClaimTakesOverFromDeadHolder(t *testing.T) {
	ctx := context.Background()
	url := pgtest.DB(t)
	s, err := OpenURL(ctx, url, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	holder, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	var pid int
	if err := holder.QueryRowContext(ctx, `SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock(7480)) l`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	// The killer's connection is opened now: a new backend can take seconds to start
	// on a loaded machine, and that must not eat into the claim's wait.
	killer, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer killer.Close()
	go func() {
		time.Sleep(claimWait / 4) // the holder dies partway through the claim's wait, the case under test
		killer.ExecContext(ctx, `SELECT pg_terminate_backend($1)`, pid)
	}()
	if err := s.Claim(ctx); err != nil {
		t.Fatalf("claim while the holder dies: %v", err)
	}
}

// A connection to a remote server that is not verified TLS is a warning in the
// store's logger; a local one, or verify-full, is not.
func TestWarnPlaintext(t *testing.T) {
	for _, c := range []struct {
		url  string
		warn bool
	}{
		{"postgres://u@db.example.com/arizuko?sslmode=disable", true},
		{"postgres://u@db.example.com/arizuko?sslmode=require", true},
		{"postgres://u@db.example.com/arizuko?sslmode=verify-full", false},
		{"postgres://u@127.0.0.1/arizuko?sslmode=disable", false},
		{"postgres://u@localhost/arizuko?sslmode=disable", false},
	} {
		cfg, err := parseURL(c.url)
		if err != nil {
			t.Fatalf("%s: %v", c.url, err)
		}
		var buf bytes.Buffer
		warnPlaintext(cfg, "db", slog.New(slog.NewTextHandler(&buf, nil)))
		if got := strings.Contains(buf.String(), `level=WARN msg="store connection is not verified TLS`); got != c.warn {
			t.Errorf("%s: warned %v (%q), want %v", c.url, got, buf.String(), c.warn)
		}
	}
}
