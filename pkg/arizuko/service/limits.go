package service

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Limits bound what one tenant (a top-level folder and everything below
// it) may hold, so one turn's agent cannot flood the store; 0 is no limit.
type Limits struct {
	Folders           int `toml:"folders"`             // folders of the tenant, the top one included
	Routes            int `toml:"routes"`              // routes targeting the tenant's folders
	Grants            int `toml:"grants"`              // grant rows scoped inside the tenant
	Observe           int `toml:"observe"`             // observe edges from the tenant's folders
	MessagesPerMinute int `toml:"messages_per_minute"` // inbound messages routed to the tenant
	Hooks             int `toml:"hooks"`               // webhooks into the tenant's folders
	Schedules         int `toml:"schedules"`           // scheduled turns of the tenant's folders
}

// DefaultLimits are arizuko.toml's [limits] defaults.
var DefaultLimits = Limits{Folders: 500, Routes: 500, Grants: 1000, Observe: 100, MessagesPerMinute: 600, Hooks: 100, Schedules: 100}

// ErrLimit is a write refused because the tenant holds its limit.
var ErrLimit = errors.New("tenant limit reached")

// limiter enforces Limits and counts its refusals per limit.
type limiter struct {
	lim      Limits
	refusals *prometheus.CounterVec

	mu    sync.Mutex
	rates map[string]*rate.Limiter // per tenant, for MessagesPerMinute
}

func newLimiter(lim Limits, reg *prometheus.Registry) *limiter {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "arizuko_tenant_limit_refusals_total",
		Help: "Writes refused because the tenant held its limit, by limit (folders, routes, grants, observe, messages_per_minute, hooks, schedules).",
	}, []string{"limit"})
	reg.MustRegister(c)
	return &limiter{lim: lim, refusals: c, rates: map[string]*rate.Limiter{}}
}

// refuse counts and audits a refusal at a limit and returns its error.
func (l *Local) refuseLimit(ctx context.Context, name, tenant string, max int) error {
	l.limits.refusals.WithLabelValues(name).Inc()
	why := fmt.Sprintf("tenant %s holds its limit of %d %s ([limits] %s in arizuko.toml)", tenant, max, name, name)
	if err := l.st.Audit(ctx, acl.Decision{Principal: l.actor(ctx), Action: "limit:" + name, Scope: tenant, Reason: why}); err != nil {
		return fmt.Errorf("%s: %w", why, ErrLimit)
	}
	return fmt.Errorf("%s: %w", why, ErrLimit)
}

// countLimit refuses one more row for tenant when n rows already reach max.
func (l *Local) countLimit(ctx context.Context, name, tenant string, max, n int) error {
	if max > 0 && n >= max {
		return l.refuseLimit(ctx, name, tenant, max)
	}
	return nil
}

func (l *Local) limitFolders(ctx context.Context, path string) error {
	max := l.limits.lim.Folders
	if max <= 0 {
		return nil
	}
	fs, err := l.st.ListFolders(ctx)
	if err != nil {
		return err
	}
	t := router.Tenant(path)
	return l.countLimit(ctx, "folders", t, max, count(fs, func(f store.Folder) bool { return router.Tenant(f.Path) == t }))
}

func (l *Local) limitRoutes(ctx context.Context, r router.Route) error {
	max := l.limits.lim.Routes
	if max <= 0 {
		return nil
	}
	rs, err := l.st.ListRoutes(ctx)
	if err != nil {
		return err
	}
	t := router.Tenant(routeScope(r.Target))
	return l.countLimit(ctx, "routes", t, max, count(rs, func(x router.Route) bool { return router.Tenant(routeScope(x.Target)) == t }))
}

func (l *Local) limitGrants(ctx context.Context, g acl.Grant) error {
	max := l.limits.lim.Grants
	t := router.Tenant(globRoot(g.Scope))
	if max <= 0 || t == "" {
		return nil
	}
	gs, err := l.st.ListGrants(ctx, "")
	if err != nil {
		return err
	}
	return l.countLimit(ctx, "grants", t, max, count(gs, func(x acl.Grant) bool { return router.Tenant(globRoot(x.Scope)) == t }))
}

// LimitObserve refuses one more observe edge from observer's tenant at its
// limit; the observe_group tool asks before it adds one.
func (l *Local) LimitObserve(ctx context.Context, observer string) error {
	max := l.limits.lim.Observe
	if max <= 0 {
		return nil
	}
	os, err := l.st.ListObservations(ctx, "")
	if err != nil {
		return err
	}
	t := router.Tenant(observer)
	return l.countLimit(ctx, "observe", t, max, count(os, func(o store.Observation) bool { return router.Tenant(o.Observer) == t }))
}

// limitMessages takes one message from the tenant's per-minute allowance.
func (l *Local) limitMessages(ctx context.Context, f string) error {
	max := l.limits.lim.MessagesPerMinute
	if max <= 0 || f == "" {
		return nil
	}
	t := router.Tenant(f)
	l.limits.mu.Lock()
	r, ok := l.limits.rates[t]
	if !ok {
		r = rate.NewLimiter(rate.Every(time.Minute/time.Duration(max)), max)
		l.limits.rates[t] = r
	}
	l.limits.mu.Unlock()
	if !r.Allow() {
		return l.refuseLimit(ctx, "messages_per_minute", t, max)
	}
	return nil
}

func (l *Local) limitHooks(ctx context.Context, f string) error {
	max := l.limits.lim.Hooks
	if max <= 0 {
		return nil
	}
	hs, err := l.st.ListHooks(ctx)
	if err != nil {
		return err
	}
	t := router.Tenant(f)
	return l.countLimit(ctx, "hooks", t, max, count(hs, func(h store.Hook) bool { return router.Tenant(h.Folder) == t }))
}

func (l *Local) limitSchedules(ctx context.Context, f string) error {
	max := l.limits.lim.Schedules
	if max <= 0 {
		return nil
	}
	ss, err := l.st.ListSchedules(ctx)
	if err != nil {
		return err
	}
	t := router.Tenant(f)
	return l.countLimit(ctx, "schedules", t, max, count(ss, func(s store.Schedule) bool { return router.Tenant(s.Folder) == t }))
}

func count[T any](xs []T, f func(T) bool) int {
	n := 0
	for _, x := range xs {
		if f(x) {
			n++
		}
	}
	return n
}
