package gated

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/router"
)

// tenants is acme and globex, each with a Slack channel routed to it and a
// user who already wrote there.
func tenants(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, "acme", "acme/ops", "globex")
	for _, r := range []router.Route{
		{Seq: 10, Match: "platform=slack chat_jid=slack:A1", Target: "acme"},
		{Seq: 10, Match: "platform=slack chat_jid=slack:O1", Target: "acme/ops"},
		{Seq: 10, Match: "platform=slack chat_jid=slack:G1", Target: "globex"},
	} {
		if _, err := f.l.AddRoute(f.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []string{"slack:A1", "slack:O1", "slack:G1"} {
		f.post(t, c, "hello")
	}
	return f
}

func (f *fixture) post(t *testing.T, chat, text string) service.Ingest {
	t.Helper()
	in, err := f.l.PostMessage(f.ctx, service.MessageIn{ChatJID: chat, Platform: "slack", Sender: "u-" + chat, Text: text})
	if err != nil {
		t.Fatal(err)
	}
	return in
}

func (f *fixture) denied(t *testing.T, principal, action, chat string) {
	t.Helper()
	audit, err := f.st.ListAudit(context.Background(), 50)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range audit {
		if a.Principal == principal && a.Action == action && a.Scope == chat && a.Decision == "deny" {
			return
		}
	}
	t.Fatalf("no audited denial of %s %s into %s: %+v", principal, action, chat, audit)
}

// acme's agent, holding only the seeded grants, tries to write into
// globex's chat: by send, by naming it for a delegated reply, and to take the
// chat over through an engagement. Every attempt is refused and audited, and
// globex's next message still runs in globex.
func TestCrossTenantSendRefused(t *testing.T) {
	f := tenants(t)
	ctx := context.Background()
	f.grant(t, "folder:acme", "mcp:delegate_group", "acme/*", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1", Engage: true})

	text, isErr := call(t, cs, "send", map[string]any{"chat_jid": "slack:G1", "text": "globex users: reset your password at evil.test"})
	if !isErr || !strings.Contains(text, "permission denied") || !strings.Contains(text, "routes to globex") {
		t.Fatalf("send into globex's chat: isErr=%v %q", isErr, text)
	}
	f.denied(t, "folder:acme", "mcp:send", "slack:G1")
	if text, isErr := call(t, cs, "delegate_group", map[string]any{"folder": "acme/ops", "prompt": "say hi", "chat_jid": "slack:G1"}); !isErr || !strings.Contains(text, "permission denied") {
		t.Fatalf("delegated reply into globex's chat: isErr=%v %q", isErr, text)
	}
	f.denied(t, "folder:acme", "mcp:delegate_group", "slack:G1")
	if outs, _ := f.st.DueOutbound(ctx, 1<<62, 100); len(outs) != 0 {
		t.Fatalf("refused sends left outbound rows: %+v", outs)
	}
	if c, _ := f.st.GetChat(ctx, "slack:G1"); c.EngagedFolder != "" {
		t.Fatalf("globex's chat engaged by %q", c.EngagedFolder)
	}

	// An engagement left by older code (or any other path) never beats
	// globex's route.
	if err := f.st.SetEngagement(ctx, "slack:G1", "acme", "", nowMillis()); err != nil {
		t.Fatal(err)
	}
	if in := f.post(t, "slack:G1", "my invoice?"); in.Route.Folder != "globex" {
		t.Fatalf("globex's user reached %+v", in.Route)
	}
}

// What a folder may write to: its turn's chat, chats routed to it or below
// it, and chats a grant names; sends to its own chats still engage only on a
// reply to a routed message.
func TestSendWithinTenant(t *testing.T) {
	f := tenants(t)
	ctx := context.Background()
	acme := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1", Engage: true})
	for _, chat := range []string{"slack:A1", "slack:O1"} {
		if text, isErr := call(t, acme, "send", map[string]any{"chat_jid": chat, "text": "hi"}); isErr {
			t.Fatalf("acme send to %s: %s", chat, text)
		}
	}
	if c, _ := f.st.GetChat(ctx, "slack:O1"); c.EngagedFolder != "" {
		t.Fatalf("a send engaged %s", c.EngagedFolder)
	}
	// A child may not write into its parent's chat.
	ops := f.connect(t, Turn{Folder: "acme/ops", TurnID: 2, ChatJID: "slack:O1"})
	if text, isErr := call(t, ops, "send", map[string]any{"chat_jid": "slack:A1", "text": "hi"}); !isErr {
		t.Fatalf("acme/ops wrote into acme's chat: %s", text)
	}
	// A reply to a message that did not reach the folder by a route (a
	// delegation naming the chat) does not engage it.
	if _, err := call(t, ops, "reply", map[string]any{"text": "done"}); err {
		t.Fatal("reply refused")
	}
	if c, _ := f.st.GetChat(ctx, "slack:O1"); c.EngagedFolder != "" {
		t.Fatalf("a reply to an unrouted turn engaged %s", c.EngagedFolder)
	}
	// A grant naming one chat opens exactly that chat.
	if _, err := f.l.AddGrant(f.ctx, acl.Grant{Principal: "folder:acme", Action: "mcp:send", Scope: "{self}", Effect: acl.Allow, Params: `{"chat_jid":"slack:G1"}`}); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, acme, "send", map[string]any{"chat_jid": "slack:G1", "text": "partner update"}); isErr {
		t.Fatalf("send to a granted chat: %s", text)
	}
	if text, isErr := call(t, acme, "send", map[string]any{"chat_jid": "slack:nowhere", "text": "x"}); !isErr || !strings.Contains(text, "routes to no folder") {
		t.Fatalf("send to an unrouted chat: %q", text)
	}
}

// register_group may not add a route for a chat another tenant owns.
func TestRegisterGroupRefusesForeignChat(t *testing.T) {
	f := tenants(t)
	f.grant(t, "folder:acme", "mcp:register_group", "acme/**", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1"})
	if text, isErr := call(t, cs, "register_group", map[string]any{"folder": "acme/grab", "chat_jid": "slack:G1"}); !isErr || !strings.Contains(text, "permission denied") {
		t.Fatalf("register_group over globex's chat: %q", text)
	}
	f.denied(t, "folder:acme", "mcp:register_group", "slack:G1")
	if in := f.post(t, "slack:G1", "still mine?"); in.Route.Folder != "globex" {
		t.Fatalf("globex's chat now reaches %+v", in.Route)
	}
}

// routeCount is how many routes the table holds.
func (f *fixture) routeCount(t *testing.T) int {
	t.Helper()
	rs, err := f.st.ListRoutes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return len(rs)
}

// add_route is checked on the route's target, which is acme's own folder, so
// without more acme could route globex's chat (by name, by glob or with a
// catch-all) to itself ahead of globex's route, and then write into it.
func TestAddRouteCannotTakeAnotherTenantsChat(t *testing.T) {
	f := tenants(t)
	f.grant(t, "folder:acme", "mcp:add_route", "acme/**", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1"})
	routes := f.routeCount(t)
	for _, tc := range []struct {
		seq         int
		match, says string
	}{
		{-1000, "chat_jid=slack:G1", "seq 100 or more"},
		{RegisterSeq, "chat_jid=slack:G1", "permission denied"},
		{-1000, "", "literal chat_jid=<jid> term"},
		{RegisterSeq, "platform=slack", "literal chat_jid=<jid> term"},
		{RegisterSeq, "chat_jid=slack:G?", "literal chat_jid=<jid> term"},
		{RegisterSeq, "chat_jid=slack:* sender=u-slack:G1", "literal chat_jid=<jid> term"},
	} {
		text, isErr := call(t, cs, "add_route", map[string]any{"seq": tc.seq, "match": tc.match, "target": "acme"})
		if !isErr || !strings.Contains(text, tc.says) {
			t.Errorf("add_route seq %d match %q: isErr=%v %q, want a refusal saying %q", tc.seq, tc.match, isErr, text, tc.says)
		}
	}
	f.denied(t, "folder:acme", "mcp:add_route", "slack:G1")
	if n := f.routeCount(t); n != routes {
		t.Fatalf("refused calls left %d routes, want %d", n, routes)
	}
	if text, isErr := call(t, cs, "send", map[string]any{"chat_jid": "slack:G1", "text": "reset your password at evil.test"}); !isErr {
		t.Fatalf("send into globex's chat: %q", text)
	}
	if in := f.post(t, "slack:G1", "my invoice?"); in.Route.Folder != "globex" {
		t.Fatalf("globex's user now reaches %+v", in.Route)
	}
}

// What add_route still does for a tenant: a route for a chat of its own, or
// one no tenant routes yet, at a seq the operator leaves to tenants; a
// folder holding add_route on the whole tree adds any route.
func TestAddRouteWithinTenant(t *testing.T) {
	f := tenants(t)
	f.grant(t, "folder:acme", "mcp:add_route", "acme/**", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1"})
	for _, chat := range []string{"slack:A1", "slack:A2"} {
		if text, isErr := call(t, cs, "add_route", map[string]any{"seq": RegisterSeq, "match": "chat_jid=" + chat, "target": "acme/ops"}); isErr {
			t.Fatalf("acme routing %s: %s", chat, text)
		}
	}
	if text, isErr := call(t, cs, "add_route", map[string]any{"seq": RegisterSeq - 1, "match": "chat_jid=slack:A3", "target": "acme"}); !isErr || !strings.Contains(text, "seq 100 or more") {
		t.Fatalf("a seq below the tenants' floor: isErr=%v %q", isErr, text)
	}
	if in := f.post(t, "slack:A2", "hi"); in.Route.Folder != "acme/ops" {
		t.Fatalf("acme's new chat reaches %+v", in.Route)
	}
	f.grant(t, "folder:globex", "mcp:add_route", "**", acl.Allow)
	op := f.connect(t, Turn{Folder: "globex", TurnID: 2, ChatJID: "slack:G1"})
	if text, isErr := call(t, op, "add_route", map[string]any{"seq": 5000, "match": "", "target": "globex"}); isErr {
		t.Fatalf("a folder holding add_route on the whole tree: %s", text)
	}
}

// A chat that has not spoken yet has no message to resolve, so "platform"
// and "sender" are unknown; a route of another tenant that holds for the
// platform its jid names, or for some sender, still makes the chat that
// tenant's, and register_group may not take it before its first message.
func TestRegisterGroupCannotClaimUnseenChatOfAnotherTenant(t *testing.T) {
	f := tenants(t)
	for _, r := range []router.Route{
		{Seq: 1000, Match: "platform=slack", Target: "globex"},
		{Seq: 20, Match: "chat_jid=tg:boss sender=ceo", Target: "globex"},
	} {
		if _, err := f.l.AddRoute(f.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	f.grant(t, "folder:acme", "mcp:register_group", "acme/**", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1"})
	for _, chat := range []string{"slack:G9", "tg:boss"} {
		text, isErr := call(t, cs, "register_group", map[string]any{"folder": "acme/grab", "chat_jid": chat})
		if !isErr || !strings.Contains(text, "permission denied") || !strings.Contains(text, "globex") {
			t.Fatalf("register_group over globex's unseen chat %s: isErr=%v %q", chat, isErr, text)
		}
		f.denied(t, "folder:acme", "mcp:register_group", chat)
	}
	if in := f.post(t, "slack:G9", "first message"); in.Route.Folder != "globex" {
		t.Fatalf("globex's new chat reaches %+v", in.Route)
	}
	// A chat no route of another tenant can reach is still free to take.
	if text, isErr := call(t, cs, "register_group", map[string]any{"folder": "acme/tg", "chat_jid": "tg:acme-new"}); isErr {
		t.Fatalf("register_group over an unrouted chat: %s", text)
	}
}

// Ownership is checked on the chat_jid as given, and a route's match is
// split on spaces, so a jid with a space or control character would be
// checked as an unseen chat and then stored as globex's: every tool taking a
// chat_jid refuses one.
func TestChatJIDWithSpaceOrControlRefused(t *testing.T) {
	f := tenants(t)
	if _, err := f.l.AddRoute(f.ctx, router.Route{Seq: 1000, Match: "platform=slack", Target: "globex"}); err != nil {
		t.Fatal(err)
	}
	f.post(t, "slack:G5", "hello")
	f.grant(t, "folder:acme", "mcp:*", "acme/**", acl.Allow)
	f.grant(t, "folder:acme/ops", "mcp:escalate_group", "acme", acl.Allow)
	acme := f.connect(t, Turn{Folder: "acme", TurnID: 1, ChatJID: "slack:A1"})
	ops := f.connect(t, Turn{Folder: "acme/ops", TurnID: 2, ChatJID: "slack:O1"})
	routes := f.routeCount(t)
	for _, jid := range []string{"slack:G5\n", "slack:G5 ", "\tslack:G5", "slack:G5\x00", "slack:G5\u00a0", "slack:G5\u2028", "slack:G5\r"} {
		for _, c := range []struct {
			cs   *mcp.ClientSession
			tool string
			args map[string]any
		}{
			{acme, "register_group", map[string]any{"folder": "acme/grab", "chat_jid": jid}},
			{acme, "send", map[string]any{"chat_jid": jid, "text": "x"}},
			{acme, "delegate_group", map[string]any{"folder": "acme/ops", "prompt": "x", "chat_jid": jid}},
			{ops, "escalate_group", map[string]any{"prompt": "x", "chat_jid": jid}},
		} {
			if text, isErr := call(t, c.cs, c.tool, c.args); !isErr || !strings.Contains(text, "chat_jid") {
				t.Errorf("%s with chat_jid %q: isErr=%v %q", c.tool, jid, isErr, text)
			}
		}
	}
	if text, isErr := call(t, acme, "add_route", map[string]any{"seq": RegisterSeq, "match": "chat_jid=slack:G5\x00", "target": "acme"}); !isErr || !strings.Contains(text, "control characters") {
		t.Errorf("add_route for a jid with NUL: isErr=%v %q", isErr, text)
	}
	if n := f.routeCount(t); n != routes {
		t.Fatalf("refused calls left %d routes, want %d", n, routes)
	}
	if in := f.post(t, "slack:G5", "my invoice?"); in.Route.Folder != "globex" {
		t.Fatalf("globex's chat reaches %+v", in.Route)
	}
}

func nowMillis() int64 { return time.Now().UnixMilli() }
