package service

import (
	"context"
	"errors"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// AddGrant stores a row the caller may delegate (acl.Policy.CanGrant).
func (l *Local) AddGrant(ctx context.Context, g acl.Grant) (acl.Grant, error) {
	g.ID = 0
	g.GrantedBy = Principal(ctx)
	if err := g.Validate(); err != nil {
		return g, err
	}
	if err := acl.ValidateKnownAction(g.Action); err != nil {
		return g, err
	}
	if f, ok := strings.CutPrefix(g.Principal, "folder:"); ok {
		if _, err := l.st.GetFolder(ctx, f); errors.Is(err, store.ErrNotFound) {
			return g, invalid("principal %s: no folder %q; add it first with `arizuko folder add %s`", g.Principal, f, f)
		} else if err != nil {
			return g, err
		}
	}
	if err := l.gate.CheckGrant(ctx, l.principal(ctx), g); err != nil {
		return g, err
	}
	if err := l.limitGrants(ctx, g); err != nil {
		return g, err
	}
	out, err := l.st.InsertGrant(ctx, g)
	if err != nil {
		return g, err
	}
	l.invalidate()
	return out, nil
}

func (l *Local) principal(ctx context.Context) string {
	if p := Principal(ctx); p != "" {
		return p
	}
	return "anonymous:"
}

// ListGrants lists rows (all, or one principal's) whose scope lies where
// the caller holds grant:read; rows of the whole tree show to its readers.
func (l *Local) ListGrants(ctx context.Context, principal string) ([]acl.Grant, error) {
	show, err := l.visible(ctx, "grant:read")
	if err != nil {
		return nil, err
	}
	gs, err := l.st.ListGrants(ctx, principal)
	return filter(gs, show, func(g acl.Grant) string { return globRoot(g.Scope) }), err
}

// RemoveGrant deletes a row the caller could have granted itself.
func (l *Local) RemoveGrant(ctx context.Context, id int64) error {
	g, err := l.st.GetGrant(ctx, id)
	if err != nil {
		return err
	}
	if err := l.gate.CheckGrant(ctx, l.principal(ctx), g); err != nil {
		return err
	}
	if err := l.st.DeleteGrant(ctx, id); err != nil {
		return err
	}
	l.invalidate()
	return nil
}

// roleRowsGrantable checks that the caller could grant every row the role
// (and the roles it is in) holds, since membership hands all of them over.
func (l *Local) roleRowsGrantable(ctx context.Context, e acl.Edge) error {
	if err := acl.ValidatePrincipal(e.Member); err != nil {
		return err
	}
	if err := acl.ValidatePrincipal(e.Role); err != nil {
		return err
	}
	if e.Member == e.Role {
		return invalid("%s cannot be a member of itself", e.Member)
	}
	p, err := l.loadPolicy(ctx)
	if err != nil {
		return err
	}
	rows, err := l.st.ListGrants(ctx, "")
	if err != nil {
		return err
	}
	held := map[string]bool{}
	for _, r := range p.Closure(e.Role) {
		held[r] = true
	}
	caller := l.principal(ctx)
	some := false
	for _, g := range rows {
		if !held[g.Principal] {
			continue
		}
		some = true
		if err := l.gate.CheckGrant(ctx, caller, g); err != nil {
			return err
		}
	}
	if !some {
		// An empty role hands nothing over, but adding edges still needs a right.
		return l.check(ctx, "grant:member", "")
	}
	return nil
}

// AddMember makes e.Member hold e.Role's rows.
func (l *Local) AddMember(ctx context.Context, e acl.Edge) error {
	if err := l.roleRowsGrantable(ctx, e); err != nil {
		return err
	}
	if err := l.st.InsertEdge(ctx, e, Principal(ctx)); err != nil {
		return err
	}
	l.invalidate()
	return nil
}

// RemoveMember removes a membership edge; same rights as adding it.
func (l *Local) RemoveMember(ctx context.Context, e acl.Edge) error {
	if err := l.roleRowsGrantable(ctx, e); err != nil {
		return err
	}
	if err := l.st.DeleteEdge(ctx, e); err != nil {
		return err
	}
	l.invalidate()
	return nil
}

// ListMembers lists membership edges; needs grant:read on the tree.
func (l *Local) ListMembers(ctx context.Context) ([]acl.Edge, error) {
	show, err := l.visible(ctx, "grant:read")
	if err != nil {
		return nil, err
	}
	es, err := l.st.ListEdges(ctx)
	return filter(es, show, func(e acl.Edge) string { return principalFolder(e.Member) }), err
}

// ListAudit returns recent audit entries; needs audit:read on the tree.
func (l *Local) ListAudit(ctx context.Context, limit int) ([]store.AuditEntry, error) {
	show, err := l.visible(ctx, "audit:read")
	if err != nil {
		return nil, err
	}
	as, err := l.st.ListAudit(ctx, limit)
	return filter(as, show, func(a store.AuditEntry) string { return a.Scope }), err
}
