package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// AddFolder validates the name, creates the row (its parent must exist) and
// the directory under <data>/folders. Needs folder:add on the new path.
func (l *Local) AddFolder(ctx context.Context, f store.Folder) (store.Folder, error) {
	if err := folder.Validate(f.Path); err != nil {
		return f, err
	}
	switch {
	case len(f.DisplayName) > 128:
		return f, invalid("display_name is longer than 128 bytes")
	case f.GuestMemoryMiB < 0 || f.GuestMemoryMiB > 1<<20:
		return f, invalid("guest_memory_mib %d: want 0 (default) to 1048576", f.GuestMemoryMiB)
	case f.GuestCPUs < 0 || f.GuestCPUs > 64:
		return f, invalid("guest_cpus %d: want 0 (default) to 64", f.GuestCPUs)
	}
	if err := validEnv(f.AgentEnv); err != nil {
		return f, err
	}
	if err := l.check(ctx, "folder:add", f.Path); err != nil {
		return f, err
	}
	if err := l.createFolder(ctx, f); err != nil {
		return f, err
	}
	return l.st.GetFolder(ctx, f.Path)
}

// createFolder adds the row and the directory, without authorization.
func (l *Local) createFolder(ctx context.Context, f store.Folder) error {
	// Resolve the directory first so a planted symlink refuses the folder
	// before any row exists.
	if _, err := folder.Path(l.opts.DataDir, f.Path); err != nil {
		return err
	}
	if err := l.limitFolders(ctx, f.Path); err != nil {
		return err
	}
	if err := l.st.InsertFolder(ctx, f, folder.Parent(f.Path)); err != nil {
		return err
	}
	l.invalidate()
	if _, err := folder.Ensure(l.opts.DataDir, f.Path); err != nil {
		if derr := l.st.DeleteFolder(ctx, f.Path); derr != nil {
			return fmt.Errorf("%w (and removing the row failed: %v)", err, derr)
		}
		return err
	}
	return nil
}

// ListFolders lists every folder; needs folder:read on the whole tree.
func (l *Local) ListFolders(ctx context.Context) ([]store.Folder, error) {
	show, err := l.visible(ctx, "folder:read")
	if err != nil {
		return nil, err
	}
	fs, err := l.st.ListFolders(ctx)
	return filter(fs, show, func(f store.Folder) string { return f.Path }), err
}

// RemoveFolder deletes a childless folder's row with what belongs to it:
// grants, secrets, and the routes and engagements sending chats to it or
// below it. Its home is moved aside (folder.RetireHome; it is the tenant's
// data, reported in the log), so a folder re-created under the same name
// starts with no files and no chats of the old tenant.
func (l *Local) RemoveFolder(ctx context.Context, path string) error {
	if err := folder.Validate(path); err != nil {
		return err
	}
	if err := l.check(ctx, "folder:rm", path); err != nil {
		return err
	}
	gone, err := l.routesOf(ctx, path)
	if err != nil {
		return err
	}
	if err := l.st.DeleteFolder(ctx, path); err != nil {
		return err
	}
	l.invalidate()
	for _, r := range gone {
		l.auditRoute(ctx, "route:rm", &r, nil)
	}
	moved, err := folder.RetireHome(l.opts.DataDir, path, time.Now())
	if err != nil {
		l.opts.Log.ErrorContext(ctx, "folder removed, home not moved aside", "folder", path, "err", err)
		return fmt.Errorf("folder %s removed, but its home was not moved aside; move it out of %s before adding a folder of that name: %w",
			path, folder.HomesRoot(l.opts.DataDir), err)
	}
	if moved != "" {
		l.opts.Log.InfoContext(ctx, "folder removed; home moved aside", "folder", path, "home", moved)
	}
	return nil
}

// routeScope is the folder a route's target names, for authorization: a
// {sender} segment becomes a literal "*", which only a "*" or "**" scope covers.
func routeScope(target string) string {
	f, _, _ := strings.Cut(target, "#")
	return strings.ReplaceAll(f, router.SenderVar, "*")
}

// AddRoute validates and stores a route; needs route:add on its target
// folder. A caller who does not hold route:add on the whole tree adds only a
// route for one chat (a literal chat_jid term) that no other tenant than the
// target's may route, at seq TenantRouteSeq or more (confineRoute).
func (l *Local) AddRoute(ctx context.Context, r router.Route) (router.Route, error) {
	r.Match = strings.Join(strings.Fields(r.Match), " ")
	if err := r.Validate(); err != nil {
		return r, err
	}
	if err := noFormat("route match", r.Match); err != nil {
		return r, err
	}
	if m, err := router.ParseMatch(r.Match); err == nil {
		if chat, ok := m.Literal("chat_jid"); ok {
			if err := ValidChatJID(chat); err != nil {
				return r, err
			}
		}
	}
	if err := l.check(ctx, "route:add", routeScope(r.Target)); err != nil {
		return r, err
	}
	if err := l.confineRoute(ctx, r); err != nil {
		return r, err
	}
	if err := l.routeFits(ctx, r); err != nil {
		return r, err
	}
	if err := l.limitRoutes(ctx, r); err != nil {
		return r, err
	}
	r.Owner = l.actor(ctx)
	out, err := l.st.InsertRoute(ctx, r)
	if err != nil {
		return r, err
	}
	l.invalidate()
	l.auditRoute(ctx, "route:add", nil, &out)
	return out, nil
}

// routeFits refuses a route that could never deliver (its target folder, or
// for a {sender} target the folder above it, does not exist) and one that
// repeats an existing route's match and target.
func (l *Local) routeFits(ctx context.Context, r router.Route) error {
	f, _, _ := strings.Cut(r.Target, "#")
	must := f
	if strings.Contains(f, router.SenderVar) {
		must = folder.Parent(f[:strings.Index(f, router.SenderVar)] + "x")
	}
	if must != "" {
		if _, err := l.st.GetFolder(ctx, must); errors.Is(err, store.ErrNotFound) {
			return invalid("route target %q: no folder %q; add it first with `arizuko folder add %s`", r.Target, must, must)
		} else if err != nil {
			return err
		}
	}
	rs, err := l.st.ListRoutes(ctx)
	if err != nil {
		return err
	}
	for _, x := range rs {
		if x.Match == r.Match && x.Target == r.Target {
			return fmt.Errorf("route %d already sends %q to %s: %w", x.ID, r.Match, r.Target, ErrConflict)
		}
	}
	return nil
}

// ListRoutes lists the table in resolution order; needs route:read on the tree.
func (l *Local) ListRoutes(ctx context.Context) ([]router.Route, error) {
	show, err := l.visible(ctx, "route:read")
	if err != nil {
		return nil, err
	}
	rs, err := l.st.ListRoutes(ctx)
	return filter(rs, show, func(r router.Route) string { return routeScope(r.Target) }), err
}

// RemoveRoute deletes a route; needs route:rm on its target folder, and a
// caller without route:rm on the whole tree removes only a route it added
// (mayRemoveRoute). Every change of the table is audited with the route.
func (l *Local) RemoveRoute(ctx context.Context, id int64) error {
	r, err := l.st.GetRoute(ctx, id)
	if err != nil {
		return err
	}
	if err := l.check(ctx, "route:rm", routeScope(r.Target)); err != nil {
		return err
	}
	if err := l.mayRemoveRoute(ctx, r); err != nil {
		return err
	}
	if err := l.st.DeleteRoute(ctx, id); err != nil {
		return err
	}
	l.invalidate()
	l.auditRoute(ctx, "route:rm", &r, nil)
	return nil
}
