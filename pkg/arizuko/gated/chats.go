package gated

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// ChatParams is the params of a grant row that names one chat a folder may
// send to although it routes elsewhere: ("folder:a", "mcp:send", "{self}",
// params {"chat_jid":"slack:C1"}).
type ChatParams struct {
	ChatJID string `json:"chat_jid"`
}

// mayChat applies the chat rule of the package doc to a message this turn's
// folder wants to write into chat (how is the tool). A refusal is audited and
// returned as a readable error wrapping acl.ErrDenied.
func (h *handler) mayChat(ctx context.Context, how, chat string) error {
	if chat == h.t.ChatJID {
		return nil
	}
	routed, why, err := h.chatFolder(ctx, chat)
	if err != nil {
		return err
	}
	if routed != "" && folder.Within(routed, h.t.Folder) {
		return nil
	}
	named, err := h.grantNames(ctx, chat)
	if err != nil || named {
		return err
	}
	d := acl.Decision{Principal: h.t.principal(), Action: "mcp:" + how, Scope: chat,
		Reason: fmt.Sprintf("chat %s %s, not to %s or below, and no mcp:send grant names it (params {\"chat_jid\":%q})", chat, why, h.t.Folder, chat)}
	h.s.o.Log.Info("gated deny", "folder", h.t.Folder, "tool", how, "chat", chat)
	return h.s.o.Gate.Refuse(ctx, d)
}

// chatFolder is the folder the route table sends chat to, engagements
// ignored: it resolves the chat's newest inbound message, or, for a chat
// never seen, a message carrying its jid and the platform the jid names.
func (h *handler) chatFolder(ctx context.Context, chat string) (string, string, error) {
	rs, err := h.s.o.Store.ListRoutes(ctx)
	if err != nil {
		return "", "", err
	}
	tab, err := router.NewTable(rs)
	if err != nil {
		return "", "", err
	}
	msg := router.Msg{ChatJID: chat}
	msg.Platform, _, _ = strings.Cut(chat, ":")
	last, err := h.s.o.Store.LastInbound(ctx, chat)
	switch {
	case err == nil:
		msg = router.Msg{Platform: last.Platform, Room: last.Room, ChatJID: chat, Sender: last.Sender, Verb: last.Verb}
	case !errors.Is(err, store.ErrNotFound):
		return "", "", err
	}
	res := tab.Resolve(msg, nil, time.Now(), 0)
	if !res.Routed() || res.Observe {
		return "", "routes to no folder", nil
	}
	return res.Folder, "routes to " + res.Folder, nil
}

// grantNames reports whether an allow row of mcp:send held by the folder
// names chat in its params; a deny of mcp:send was already checked.
func (h *handler) grantNames(ctx context.Context, chat string) (bool, error) {
	p, err := h.s.o.Gate.Policy(ctx)
	if err != nil {
		return false, err
	}
	rows, err := h.s.o.Store.ListGrants(ctx, "")
	if err != nil {
		return false, err
	}
	in := map[string]bool{}
	for _, c := range p.Closure(h.t.principal()) {
		in[c] = true
	}
	for _, g := range rows {
		if !in[g.Principal] || g.Effect != acl.Allow || g.Params == "" || !acl.ActionMatch(g.Action, "mcp:send") {
			continue
		}
		var cp ChatParams
		scope := strings.ReplaceAll(g.Scope, acl.SelfSegment, h.t.Folder)
		if json.Unmarshal([]byte(g.Params), &cp) == nil && cp.ChatJID == chat && acl.ScopeMatch(scope, h.t.Folder) {
			return true, nil
		}
	}
	return false, nil
}

// ownTenant refuses (and audits) a chat some route could send to another
// tenant than the turn's folder's, for some sender or a room not yet seen
// (service.ForeignClaim): a new route for it would take it over.
func (h *handler) ownTenant(ctx context.Context, how, chat string) error {
	tenant := router.Tenant(h.t.Folder)
	cl, foreign, err := service.ForeignClaim(ctx, h.s.o.Store, chat, tenant)
	if err != nil || !foreign {
		return err
	}
	h.s.o.Log.Info("gated deny", "folder", h.t.Folder, "tool", how, "chat", chat, "route", cl.RouteID)
	d := acl.Decision{Principal: h.t.principal(), Action: "mcp:" + how, Scope: chat, Reason: service.ClaimReason(chat, cl, tenant)}
	return h.s.o.Gate.Refuse(ctx, d)
}
