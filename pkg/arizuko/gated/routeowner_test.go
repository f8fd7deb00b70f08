package gated

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/router"
)

// A tenant's agent holding mcp:delete_route on its own folder cannot delete
// the operator's route to it (a catch-all below would take the chat to
// another tenant): refused and audited, the route stays and still routes.
// It deletes the route it added itself, and every change of the table, by
// the operator or the tenant, is one audit row with the route before and
// after.
func TestTenantDeletesOnlyItsOwnRoutes(t *testing.T) {
	e := newToolEnv(t, "corp")
	ctx := context.Background()
	op, err := e.l.AddRoute(e.ctx, router.Route{Seq: 10, Match: "platform=tg chat_jid=tg:alice", Target: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddRoute(e.ctx, router.Route{Seq: 50, Match: "platform=tg", Target: "hr"}); err != nil {
		t.Fatal(err)
	}
	e.grant(t, "folder:corp", "mcp:delete_route", "corp", acl.Allow)
	e.grant(t, "folder:corp", "mcp:add_route", "corp", acl.Allow)
	cs := e.connect(t, e.turn)

	before := len(e.audit(t))
	text, isErr := call(t, cs, "delete_route", map[string]any{"id": op.ID})
	if !isErr || !strings.Contains(text, "permission denied") || !strings.Contains(text, "added by user:admin") {
		t.Fatalf("deleting the operator's route: isErr=%v %q", isErr, text)
	}
	a := e.audit(t)
	if len(a) != before+1 || a[0].Principal != "folder:corp" || a[0].Action != "route:rm" || a[0].Decision != "deny" || a[0].Scope != "corp" {
		t.Fatalf("audit after the refusal: %+v", a[:len(a)-before])
	}
	res, err := e.l.Resolve(e.ctx, service.MessageIn{ChatJID: "tg:alice", Platform: "tg", Sender: "alice", Text: "my private note"})
	if err != nil || res.Folder != "corp" {
		t.Fatalf("alice's chat now routes to %q (%v), want corp", res.Folder, err)
	}

	text, isErr = call(t, cs, "add_route", map[string]any{"seq": RegisterSeq, "match": "chat_jid=irc:corp-ops", "target": "corp"})
	if isErr {
		t.Fatalf("add_route: %s", text)
	}
	var own int64
	fmt.Sscanf(text, "route %d added", &own)
	rs, _ := e.st.ListRoutes(ctx)
	for _, r := range rs {
		if r.ID == own && r.Owner != "folder:corp" || r.ID == op.ID && r.Owner != service.AdminPrincipal {
			t.Errorf("route %+v: wrong owner", r)
		}
	}
	if text, isErr = call(t, cs, "delete_route", map[string]any{"id": own}); isErr {
		t.Fatalf("deleting its own route: %s", text)
	}
	// The operator removes its own route too.
	if err := e.l.RemoveRoute(e.ctx, op.ID); err != nil {
		t.Fatal(err)
	}
	var changes []string
	for _, x := range e.audit(t) {
		if x.Decision == "allow" && strings.HasPrefix(x.Action, "route:") {
			changes = append(changes, x.Principal+" "+x.Action+" "+x.Reason)
		}
	}
	want := []string{
		fmt.Sprintf(`user:admin route:rm before: route %d seq 10 match "platform=tg chat_jid=tg:alice" target "corp" owner user:admin; after: none`, op.ID),
		fmt.Sprintf(`folder:corp route:rm before: route %d seq 100 match "chat_jid=irc:corp-ops" target "corp" owner folder:corp; after: none`, own),
		fmt.Sprintf(`folder:corp route:add before: none; after: route %d seq 100 match "chat_jid=irc:corp-ops" target "corp" owner folder:corp`, own),
	}
	if len(changes) != 5 || strings.Join(changes[:3], "\n") != strings.Join(want, "\n") {
		t.Fatalf("route changes audited:\n%s\nwant first\n%s", strings.Join(changes, "\n"), strings.Join(want, "\n"))
	}
}

// A user holding route:rm on one tenant's tree, through the API's service,
// is held to the same rule as the tenant's agent.
func TestTenantUserDeletesOnlyItsOwnRoutes(t *testing.T) {
	e := newToolEnv(t, "corp")
	op, err := e.l.AddRoute(e.ctx, router.Route{Seq: 10, Match: "platform=tg chat_jid=tg:alice", Target: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"route:rm", "route:add"} {
		e.grant(t, "user:corp-admin", a, "corp/**", acl.Allow)
	}
	u := service.WithPrincipal(context.Background(), "user:corp-admin")
	if err := e.l.RemoveRoute(u, op.ID); !strings.Contains(fmt.Sprint(err), "permission denied") {
		t.Fatalf("corp-admin removed the operator's route: %v", err)
	}
	mine, err := e.l.AddRoute(u, router.Route{Seq: 100, Match: "chat_jid=irc:corp-ops", Target: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.l.RemoveRoute(u, mine.ID); err != nil {
		t.Fatalf("removing its own route: %v", err)
	}
}
