package gated

import (
	"context"
	"fmt"
	"strconv"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

type hostIn struct {
	Host   string `json:"host"`
	Folder string `json:"folder"`
}

type folderIn struct {
	Folder string `json:"folder"`
}

type routeIn struct {
	Seq    int    `json:"seq"`
	Match  string `json:"match"`
	Target string `json:"target"`
}

type routeIDIn struct {
	ID int64 `json:"id"`
}

// registerNetwork adds the tools that read and change a folder's network rules.
func (h *handler) registerNetwork(srv *mcp.Server) {
	for _, eff := range []string{"allow", "deny"} {
		add(srv, "network_"+eff, "Let the folder's guests "+eff+" a host from the next turn on.", schema("host:string", "folder?:string"),
			func(ctx context.Context, in hostIn) (string, error) {
				f, err := h.optFolder(in.Folder)
				if err != nil {
					return "", err
				}
				if err := h.check(ctx, "network_"+eff, f); err != nil {
					return "", err
				}
				r, err := h.s.o.Control.SetNetworkRule(h.admin(ctx), store.NetworkRule{Folder: f, Host: in.Host, Effect: eff})
				if err != nil {
					return "", err
				}
				return fmt.Sprintf("%s %s for %s (from the next turn)", eff, r.Host, f), nil
			})
	}
	add(srv, "network_list", "Show the folder's network rules and effective allowlist.", schema("folder?:string"),
		func(ctx context.Context, in folderIn) (string, error) {
			f, err := h.optFolder(in.Folder)
			if err != nil {
				return "", err
			}
			if err := h.check(ctx, "network_list", f); err != nil {
				return "", err
			}
			v, err := h.s.o.Control.ListNetwork(h.admin(ctx), f)
			if err != nil {
				return "", err
			}
			return jsonText(v)
		})
}

// registerRoutes adds the route tools; each is checked against the folder the
// route targets, and a route added is confined to one chat of the tenant
// (confineRoute).
func (h *handler) registerRoutes(srv *mcp.Server) {
	add(srv, "list_routes", "List the routes that reach this folder or below it.", schema(),
		func(ctx context.Context, _ struct{}) (string, error) {
			if err := h.check(ctx, "list_routes", h.t.Folder); err != nil {
				return "", err
			}
			rs, err := h.s.o.Store.ListRoutes(ctx)
			if err != nil {
				return "", err
			}
			out := []router.Route{} // an empty list, never null
			for _, r := range rs {
				if t, err := router.ParseTarget(r.Target); err == nil && folder.Within(t.Folder, h.t.Folder) {
					out = append(out, r)
				}
			}
			return jsonText(out)
		})
	add(srv, "add_route", "Add a route: match is space-separated key=glob terms, target is folder[#topic]. "+
		"Unless the folder holds add_route on the whole tree, the match names one chat of its tenant "+
		"(a literal chat_jid=<jid> term) and seq is at least "+strconv.Itoa(service.TenantRouteSeq)+".",
		schema("seq:integer", "match:string", "target:string"),
		func(ctx context.Context, in routeIn) (string, error) {
			r := router.Route{Seq: in.Seq, Match: in.Match, Target: in.Target}
			if err := r.Validate(); err != nil {
				return "", err
			}
			t, _ := router.ParseTarget(in.Target)
			if err := h.check(ctx, "add_route", t.Folder); err != nil {
				return "", err
			}
			if err := h.confineRoute(ctx, r); err != nil {
				return "", err
			}
			out, err := h.s.o.Control.AddRoute(h.admin(ctx), r)
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("route %d added", out.ID), nil
		})
	add(srv, "delete_route", "Delete a route by id.", schema("id:integer"),
		func(ctx context.Context, in routeIDIn) (string, error) {
			r, err := h.s.o.Store.GetRoute(ctx, in.ID)
			if err != nil {
				return "", err
			}
			t, err := router.ParseTarget(r.Target)
			if err != nil {
				return "", err
			}
			if err := h.check(ctx, "delete_route", t.Folder); err != nil {
				return "", err
			}
			if err := h.s.o.Control.RemoveRoute(h.admin(ctx), in.ID); err != nil {
				return "", err
			}
			return fmt.Sprintf("route %d deleted", in.ID), nil
		})
}

// confineRoute keeps a route the folder adds without holding add_route on
// the whole tree to one chat of its own tenant, at a seq no lower than the
// operator's routes leave to tenants (service.TenantRoute, ownTenant).
func (h *handler) confineRoute(ctx context.Context, r router.Route) error {
	p, err := h.s.o.Gate.Policy(ctx)
	if err != nil {
		return fmt.Errorf("acl: load policy: %w", err)
	}
	if p.Decide(h.t.principal(), "mcp:add_route", "").Allow {
		return nil
	}
	chat, err := service.TenantRoute(r)
	if err != nil {
		return err
	}
	return h.ownTenant(ctx, "add_route", chat)
}
