package service

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// DBFile is the database file name inside the data dir.
const DBFile = "arizuko.db"

// Options configure a Local service.
type Options struct {
	DataDir       string
	Ring          *secrets.Ring // nil: secret operations fail with ErrUnavailable
	EngagementTTL time.Duration // 0: router.DefaultEngagementTTL
	Create        bool          // create the data dir and database when missing
	// MaxTurnsPerDay is the instance default of the per-folder turn budget (0 = unlimited).
	MaxTurnsPerDay int
	// AllowCIDRs are the operator's proxy.allow_cidrs: the only private
	// ranges a tenant's allowlist may name.
	AllowCIDRs []netip.Prefix
	// Limits bound each tenant's folders, routes, grants, observe edges and
	// messages; the zero value limits nothing.
	Limits Limits
	// Store is a PostgreSQL URL (postgres://…) holding the database instead of the
	// data dir's SQLite file; "" is SQLite.
	Store string
	// Log hears of the store, of denials and of what a write could not finish; nil discards.
	Log *slog.Logger
}

// Local is the store-backed Service.
type Local struct {
	st   *store.Store
	opts Options
	gate *acl.Gate

	mu     sync.Mutex
	policy *acl.Policy   // nil after a grant, membership or folder write
	table  *router.Table // nil after a route write

	limits *limiter
	reg    *prometheus.Registry // the service's own metrics

	keyMu sync.Mutex
	keyOK bool // the ring opened the store's key check
}

var _ Service = (*Local)(nil)

// Open opens the data dir's database. Without Create a missing database is
// an error telling the operator to run `arizuko init`.
func Open(ctx context.Context, o Options) (*Local, error) {
	if o.DataDir == "" {
		return nil, fmt.Errorf("data dir is empty (set --data): %w", ErrInvalid)
	}
	if o.Store != "" {
		st, err := store.OpenURL(ctx, o.Store, o.Create, o.Log)
		if err != nil {
			return nil, err
		}
		return localOn(st, o), nil
	}
	dbPath := filepath.Join(o.DataDir, DBFile)
	if !o.Create {
		if _, err := os.Stat(dbPath); errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s does not exist; run `arizuko init --data %s` first: %w", dbPath, o.DataDir, ErrNotFound)
		}
	} else if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	st, err := store.Open(ctx, dbPath, o.Log)
	if err != nil {
		return nil, err
	}
	// Messages and sealed secrets live here: owner-only, whatever the umask.
	if err := os.Chmod(dbPath, 0o600); err != nil {
		st.Close()
		return nil, err
	}
	return localOn(st, o), nil
}

func localOn(st *store.Store, o Options) *Local {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	reg := prometheus.NewRegistry()
	l := &Local{st: st, opts: o, reg: reg, limits: newLimiter(o.Limits, reg)}
	l.gate = &acl.Gate{Policy: l.loadPolicy, Audit: st.Audit, Log: o.Log}
	return l
}

// Metrics serves the service's metrics in the Prometheus text format; the
// caller decides who may read them.
func (l *Local) Metrics() http.Handler {
	return promhttp.HandlerFor(l.reg, promhttp.HandlerOpts{})
}

// Registry is where the daemon's parts register their own metrics.
func (l *Local) Registry() prometheus.Registerer { return l.reg }

// Close closes the database.
func (l *Local) Close() error { return l.st.Close() }

// Store exposes the database to the turn pipeline living in the same process.
func (l *Local) Store() *store.Store { return l.st }

// Gate is the acl gate every caller (API, CLI, MCP tools) must use.
func (l *Local) Gate() *acl.Gate { return l.gate }

// Log is the logger the service was opened with, for the daemon's parts
// serving beside it.
func (l *Local) Log() *slog.Logger { return l.opts.Log }

// DataDir is the data dir this service runs on.
func (l *Local) DataDir() string { return l.opts.DataDir }

func (l *Local) loadPolicy(ctx context.Context) (*acl.Policy, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.policy != nil {
		return l.policy, nil
	}
	p, err := l.st.Policy(ctx)
	if err != nil {
		return nil, err
	}
	l.policy = p
	return p, nil
}

func (l *Local) routeTable(ctx context.Context) (*router.Table, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.table != nil {
		return l.table, nil
	}
	rs, err := l.st.ListRoutes(ctx)
	if err != nil {
		return nil, err
	}
	t, err := router.NewTable(rs)
	if err != nil {
		return nil, err
	}
	l.table = t
	return t, nil
}

// invalidate drops cached policy and routes after a write.
func (l *Local) invalidate() {
	l.mu.Lock()
	l.policy, l.table = nil, nil
	l.mu.Unlock()
}

// check authorizes the context's principal; a missing principal is denied
// (and audited) like any other.
func (l *Local) check(ctx context.Context, action, scope string) error {
	return l.gate.Check(ctx, l.principal(ctx), action, scope)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalid)...)
}
