package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// acmeAdmin sets up tenants acme and globex, globex with a routed Slack
// chat, and a user who holds route:add on acme's tree only.
func acmeAdmin(t *testing.T) (*Local, context.Context, context.Context) {
	t.Helper()
	l, ctx := newLocal(t, nil)
	mustFolders(t, l, ctx, "acme", "globex")
	if _, err := l.AddRoute(ctx, router.Route{Seq: 10, Match: "platform=slack chat_jid=slack:G1", Target: "globex"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AddGrant(ctx, acl.Grant{Principal: "user:acme-admin", Action: "route:add", Scope: "acme/**", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	return l, ctx, WithPrincipal(context.Background(), "user:acme-admin")
}

func resolveTo(t *testing.T, l *Local, ctx context.Context, chat string) string {
	t.Helper()
	res, err := l.Resolve(ctx, MessageIn{ChatJID: chat, Platform: "slack", Sender: "u", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	return res.Folder
}

// route:add on a tenant's tree is checked on the route's target, so without
// more a tenant's admin could route every chat, or another tenant's chat by
// name, to its own folder ahead of the operator's routes.
func TestRouteAddOnOwnTargetCannotTakeAnotherTenantsChat(t *testing.T) {
	l, ctx, acme := acmeAdmin(t)
	for _, tc := range []struct {
		r    router.Route
		want error
		says string
	}{
		{router.Route{Seq: -1, Match: "", Target: "acme"}, ErrInvalid, "chat_jid=<jid>"},
		{router.Route{Seq: TenantRouteSeq, Match: "platform=slack", Target: "acme"}, ErrInvalid, "chat_jid=<jid>"},
		{router.Route{Seq: TenantRouteSeq, Match: "chat_jid=slack:G*", Target: "acme"}, ErrInvalid, "no * or ?"},
		{router.Route{Seq: -1, Match: "chat_jid=slack:G1", Target: "acme"}, ErrInvalid, "seq 100 or more"},
		{router.Route{Seq: TenantRouteSeq, Match: "chat_jid=slack:G1", Target: "acme"}, acl.ErrDenied, "another tenant than acme"},
		{router.Route{Seq: TenantRouteSeq, Match: "chat_jid=slack:G1\x00", Target: "acme"}, ErrInvalid, "control characters"},
	} {
		before := auditCount(t, l)
		_, err := l.AddRoute(acme, tc.r)
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("AddRoute(%+v) = %v, want %v saying %q", tc.r, err, tc.want, tc.says)
		}
		if tc.want == acl.ErrDenied && auditCount(t, l) != before+1 {
			t.Errorf("AddRoute(%+v): refusal not audited", tc.r)
		}
	}
	if f := resolveTo(t, l, ctx, "slack:G1"); f != "globex" {
		t.Fatalf("globex's chat reaches %q", f)
	}
	// acme's admin still routes a chat no other tenant's route reaches, and
	// the operator still adds any route.
	if _, err := l.AddRoute(acme, router.Route{Seq: TenantRouteSeq, Match: "chat_jid=slack:A1", Target: "acme"}); err != nil {
		t.Fatalf("acme's own chat: %v", err)
	}
	if _, err := l.AddRoute(ctx, router.Route{Seq: 1000, Match: "", Target: "acme"}); err != nil {
		t.Fatalf("operator catch-all: %v", err)
	}
	if f := resolveTo(t, l, ctx, "slack:A1"); f != "acme" {
		t.Fatalf("acme's chat reaches %q", f)
	}
}

// A chat no route takes reaches the folder it is engaged with, here globex's
// (its route was removed, the engagement stayed). It is globex's all the same:
// acme's admin cannot name it in a route of its own.
func TestRouteAddCannotTakeAChatEngagedWithAnotherTenant(t *testing.T) {
	l, ctx, acme := acmeAdmin(t)
	if _, err := l.PostMessage(ctx, MessageIn{ChatJID: "slack:G2", Platform: "slack", Sender: "u", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Store().SetEngagement(ctx, "slack:G2", "globex", "", nowMillis()); err != nil {
		t.Fatal(err)
	}
	if f := resolveTo(t, l, ctx, "slack:G2"); f != "globex" {
		t.Fatalf("the engaged chat reaches %q, want globex", f)
	}
	_, err := l.AddRoute(acme, router.Route{Seq: TenantRouteSeq, Match: "chat_jid=slack:G2", Target: "acme"})
	if !errors.Is(err, acl.ErrDenied) || !strings.Contains(err.Error(), "engaged with globex") {
		t.Fatalf("AddRoute on globex's engaged chat = %v, want it denied as engaged with globex", err)
	}
	if f := resolveTo(t, l, ctx, "slack:G2"); f != "globex" {
		t.Fatalf("globex's engaged chat now reaches %q", f)
	}
}

// DeleteFolder promises a folder re-created under the same name starts
// clean: the old tenant's home (memory, session state) and its chats must
// not pass to whoever gets the name next.
func TestRecreatedFolderGetsNothingOfTheOldTenant(t *testing.T) {
	l, ctx := newLocal(t, nil)
	mustFolders(t, l, ctx, "users", "users/alice")
	if _, err := l.AddRoute(ctx, router.Route{Seq: 10, Match: "chat_jid=tg:dm:alice", Target: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.PostMessage(ctx, MessageIn{ChatJID: "tg:dm:alice", Platform: "tg", Sender: "alice", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Store().SetEngagement(ctx, "tg:dm:alice", "users/alice", "", nowMillis()); err != nil {
		t.Fatal(err)
	}
	home, err := folder.Home(l.DataDir(), "users/alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "memory.md"), []byte("alice's bank PIN is 1234"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveFolder(ctx, "users/alice"); err != nil {
		t.Fatal(err)
	}
	// Someone else gets the name: the operator, register_group, or a
	// {sender} route's first contact.
	if _, err := l.AddFolder(ctx, store.Folder{Path: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(home); err != nil || len(ents) != 0 {
		t.Errorf("the re-created folder's home holds %v (%v), want it empty", ents, err)
	}
	old, _ := filepath.Glob(filepath.Join(folder.HomesRoot(l.DataDir()), folder.RemovedHomes, "users%2Falice-*", "memory.md"))
	if len(old) != 1 {
		t.Errorf("the old home was not kept aside: %v", old)
	}
	res, err := l.Resolve(ctx, MessageIn{ChatJID: "tg:dm:alice", Platform: "tg", Sender: "alice", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folder == "users/alice" {
		t.Errorf("the old tenant's chat reaches the re-created folder: %s", res.Reason)
	}
	if c, _ := l.Store().GetChat(ctx, "tg:dm:alice"); c.EngagedFolder != "" {
		t.Errorf("the old tenant's chat is still engaged with %q", c.EngagedFolder)
	}
}

// A chat jid with a space or control character is a different chat from the
// one a route written for it matches, so no endpoint takes one.
func TestChatJIDWithSpaceOrControlRefused(t *testing.T) {
	l, ctx := newLocal(t, nil)
	for _, jid := range []string{"slack:G1\n", "slack:G1 ", "\tslack:G1", "slack:G\x001", "slack:G1\u00a0", "slack:G1\u2028", "slack:G1\x7f"} {
		if err := ValidChatJID(jid); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidChatJID(%q) = %v", jid, err)
		}
		if _, err := l.PostMessage(ctx, MessageIn{ChatJID: jid, Platform: "slack", Text: "hi"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("PostMessage(%q) = %v", jid, err)
		}
	}
	for _, jid := range []string{"slack:G1", "tg:dm:42", "mail:a@b.example", "irc:#chan", "web:corp/eng#x", "matrix:!room:example.org", "mail:bounce+a=b@x.example"} {
		if err := ValidChatJID(jid); err != nil {
			t.Errorf("ValidChatJID(%q) = %v", jid, err)
		}
	}
}
