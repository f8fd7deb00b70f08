package service

import (
	"context"
	"fmt"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/router"
)

// actor is who a change is for, as audit rows and owners name it.
func (l *Local) actor(ctx context.Context) string {
	if p := Actor(ctx); p != "" {
		return p
	}
	return l.principal(ctx)
}

// describeRoute is one route as an audit row's before or after.
func describeRoute(r *router.Route) string {
	if r == nil {
		return "none"
	}
	owner := r.Owner
	if owner == "" {
		owner = "operator"
	}
	return fmt.Sprintf("route %d seq %d match %q target %q owner %s", r.ID, r.Seq, r.Match, r.Target, owner)
}

// auditRoute records one route change, allowed, with the route before and
// after it; the operator reads every change of the table in the audit log.
func (l *Local) auditRoute(ctx context.Context, action string, before, after *router.Route) {
	r := after
	if r == nil {
		r = before
	}
	d := acl.Decision{Allow: true, Principal: l.actor(ctx), Action: action, Scope: routeScope(r.Target),
		Reason: "before: " + describeRoute(before) + "; after: " + describeRoute(after)}
	if err := l.st.Audit(ctx, d); err != nil {
		l.opts.Log.ErrorContext(ctx, "route change not audited", "action", action, "route", r.ID, "err", err)
	}
}

// mayRemoveRoute refuses, audited, a caller who is not an operator
// (route:rm on the whole tree) removing a route it did not add: an
// operator's route (seq below TenantRouteSeq, or no owner) or another
// principal's. A tool call is judged as the folder it runs for.
func (l *Local) mayRemoveRoute(ctx context.Context, r router.Route) error {
	p, err := l.loadPolicy(ctx)
	if err != nil {
		return err
	}
	actor := l.actor(ctx)
	if p.Decide(actor, "route:rm", "").Allow {
		return nil
	}
	if r.Owner == actor && r.Seq >= TenantRouteSeq {
		return nil
	}
	why := fmt.Sprintf("route %d (seq %d, target %s) was added by %s; a tenant removes only routes it added itself, at seq %d or more",
		r.ID, r.Seq, r.Target, ownerName(r.Owner), TenantRouteSeq)
	return l.gate.Refuse(ctx, acl.Decision{Principal: actor, Action: "route:rm", Scope: routeScope(r.Target), Reason: why})
}

func ownerName(o string) string {
	if o == "" {
		return "the operator"
	}
	return o
}

// routesOf are the routes sending chats to f or below it, which removing f
// takes along.
func (l *Local) routesOf(ctx context.Context, f string) ([]router.Route, error) {
	rs, err := l.st.ListRoutes(ctx)
	if err != nil {
		return nil, err
	}
	var out []router.Route
	for _, r := range rs {
		if t, err := router.ParseTarget(r.Target); err == nil && folder.Within(t.Folder, f) {
			out = append(out, r)
		}
	}
	return out, nil
}
