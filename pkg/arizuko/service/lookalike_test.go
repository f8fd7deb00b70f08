package service

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/router"
)

// Identifiers refuse format and bidi controls everywhere, and chat jids of
// platforms whose ids are ASCII refuse every other letter, so no look-alike
// of another tenant's chat can be routed, posted to or claimed.
func TestLookalikesAndBidiRefused(t *testing.T) {
	l, admin := newLocal(t, nil)
	mustFolders(t, l, admin, "acme", "globex")
	if _, err := l.AddRoute(admin, router.Route{Seq: 10, Match: "chat_jid=web:globex", Target: "globex"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ jid, want string }{
		{"web:glob\u0435x", "look-alike"},
		{"slack:C0\u04251", "look-alike"},
		{"term-1a2b:me\u200b", "bidi"},
		{"web:acme#\u202etxt.exe", "bidi"},
		{"mail:bob\u2066@example.com", "bidi"},
	} {
		_, err := l.AddRoute(admin, router.Route{Seq: 100, Match: "chat_jid=" + c.jid, Target: "acme"})
		if Code(err) != CodeInvalid || !strings.Contains(err.Error(), c.want) {
			t.Errorf("route for %q: %v, want refused (%s)", c.jid, err, c.want)
		}
		if _, err := l.PostMessage(admin, MessageIn{ChatJID: c.jid, Platform: "slack", Text: "hi"}); Code(err) != CodeInvalid {
			t.Errorf("message to %q: %v, want refused", c.jid, err)
		}
	}
	for _, in := range []MessageIn{
		{ChatJID: "slack:C1", Platform: "slack", Sender: "alice\u202e", Text: "hi"},
		{ChatJID: "slack:C1", Platform: "slack", Room: "ops\u200d", Text: "hi"},
	} {
		if _, err := l.PostMessage(admin, in); Code(err) != CodeInvalid || !strings.Contains(err.Error(), "bidi") {
			t.Errorf("%+v: %v, want refused", in, err)
		}
	}
	if err := ValidPlatform("sl\u0430ck"); Code(err) != CodeInvalid {
		t.Errorf("non-ASCII platform: %v", err)
	}
	// A platform whose ids are not ASCII keeps them; text keeps any letter.
	if _, err := l.PostMessage(admin, MessageIn{ChatJID: "mail:josé@example.com", Platform: "mail", Text: "\u202eolleh"}); err != nil {
		t.Errorf("mail chat with an accent: %v", err)
	}
}

// On a platform whose ids are not ASCII, a tenant's route for a chat that
// looks like another tenant's (the same TR39 skeleton) is refused and
// audited; a chat that merely shares letters passes.
func TestLookalikeClaimRefused(t *testing.T) {
	l, admin, acme := acmeAdmin(t)
	if _, err := l.AddRoute(admin, router.Route{Seq: 10, Match: "chat_jid=mail:bob@example.com", Target: "globex"}); err != nil {
		t.Fatal(err)
	}
	_, err := l.AddRoute(acme, router.Route{Seq: 100, Match: "chat_jid=mail:bob@ex\u0430mple.com", Target: "acme"})
	if Code(err) != CodeDenied || !strings.Contains(err.Error(), "looks like mail:bob@example.com") {
		t.Fatalf("look-alike route: %v", err)
	}
	a, _ := l.Store().ListAudit(context.Background(), 1)
	if len(a) != 1 || a[0].Principal != "user:acme-admin" || a[0].Decision != "deny" || !strings.Contains(a[0].Reason, "TR39") {
		t.Fatalf("audit %+v", a)
	}
	if _, err := l.AddRoute(acme, router.Route{Seq: 100, Match: "chat_jid=mail:b\u00f6b@example.com", Target: "acme"}); err != nil {
		t.Fatalf("a different name with an accent: %v", err)
	}
}
