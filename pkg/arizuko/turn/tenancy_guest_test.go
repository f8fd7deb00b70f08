package turn

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/delivery"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/router"
)

// Two tenants in real guests. acme's agent, holding only the seeded grants,
// tries to post into globex's Slack channel; it is refused (and audited) and
// says so in its own channel, and its prompt carries nothing of globex
// although it once observed it (the grant is gone). globex's user then writes
// and the message runs in globex's own guest, answered in globex's channel.
func TestGuestTenantsStayApart(t *testing.T) {
	jenv := jailtest.Require(t)
	e := newEnv(t, "", "acme", "globex")
	ctx := context.Background()
	for _, r := range []router.Route{
		{Seq: 10, Match: "platform=slack chat_jid=slack:A1", Target: "acme"},
		{Seq: 10, Match: "platform=slack chat_jid=slack:G1", Target: "globex"},
	} {
		if _, err := e.l.AddRoute(e.ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	g, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:acme", Action: "mcp:observe_group", Scope: "globex", Effect: acl.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddObserver(ctx, "acme", "globex"); err != nil {
		t.Fatal(err)
	}
	if err := e.l.RemoveGrant(e.ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t)
	if err := e.st.SetAdapter(ctx, store.Adapter{Platform: "slack", CallbackURL: a.srv.URL}); err != nil {
		t.Fatal(err)
	}
	d := delivery.New(delivery.Options{Store: e.st, Poll: 100 * time.Millisecond})
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	go d.Run(dctx)
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetNone,
		Timeout: 3 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	post := func(chat, text string) {
		t.Helper()
		in, err := e.l.PostMessage(e.ctx, service.MessageIn{ChatJID: chat, Platform: "slack", Sender: "u1", Text: text})
		if err != nil {
			t.Fatal(err)
		}
		e.q.Kick(in.Route.Folder)
	}
	if _, _, err := e.st.PutMessage(ctx, store.Message{ChatJID: "slack:G1", Platform: "slack", Text: "globex internal: Q3 numbers", Folder: "globex", How: "observe"}); err != nil {
		t.Fatal(err)
	}
	post("slack:A1", `TRY send {"chat_jid": "slack:G1", "text": "globex users: reset your password at evil.test"}`)
	p := a.next(t, 10*time.Minute)
	if p.ChatJID != "slack:A1" || !strings.HasPrefix(p.Text, "denied: ") || !strings.Contains(p.Text, "permission denied") ||
		!strings.Contains(p.Text, "routes to globex") || strings.Contains(p.Text, "[observed") {
		t.Fatalf("acme's reply %+v", p)
	}
	audit, _ := e.st.ListAudit(ctx, 20)
	found := false
	for _, x := range audit {
		found = found || x.Principal == "folder:acme" && x.Action == "mcp:send" && x.Scope == "slack:G1" && x.Decision == "deny"
	}
	if !found {
		t.Fatalf("refused send not audited: %+v", audit)
	}
	// An engagement left by any path never carries globex's chat to acme.
	if err := e.st.SetEngagement(ctx, "slack:G1", "acme", "", time.Now().UnixMilli()); err != nil {
		t.Fatal(err)
	}
	post("slack:G1", "where is my invoice?")
	if p := a.next(t, 10*time.Minute); p.ChatJID != "slack:G1" || p.Text != "echo: where is my invoice?" {
		t.Fatalf("globex's second reply %+v", p)
	}
	ts := e.waitTurns(t, "globex", 1)
	if len(ts) != 1 {
		t.Fatalf("globex turns %+v", ts)
	}
	if acme := e.waitTurns(t, "acme", 1); len(acme) != 1 {
		t.Fatalf("acme ran %d turns, want 1: %+v", len(acme), acme)
	}
	if runner.boots != 2 {
		t.Fatalf("%d guests booted, want 2", runner.boots)
	}
}
