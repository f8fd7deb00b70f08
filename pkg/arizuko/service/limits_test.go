package service

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Each tenant stops at its limits with a clear error (code limit), an
// audit row and a count in the metric; another tenant is not held by them.
func TestTenantLimits(t *testing.T) {
	l, admin := newLocal(t, nil)
	l.reg = prometheus.NewRegistry()
	l.limits = newLimiter(Limits{Folders: 3, Routes: 2, Grants: 2, Observe: 1, MessagesPerMinute: 4, Hooks: 1, Schedules: 1}, l.reg)
	atLimit := func(what string, err error) {
		t.Helper()
		if Code(err) != CodeLimit || !strings.Contains(err.Error(), "acme holds its limit") || !strings.Contains(err.Error(), "[limits]") {
			t.Fatalf("%s past the limit: %v", what, err)
		}
	}
	mustFolders(t, l, admin, "acme", "acme/a", "acme/b", "globex")
	_, err := l.AddFolder(admin, store.Folder{Path: "acme/c"})
	atLimit("folder", err)
	mustFolders(t, l, admin, "globex/a")

	for i := 0; i < 2; i++ {
		if _, err := l.AddRoute(admin, router.Route{Seq: 10, Match: fmt.Sprintf("chat_jid=slack:A%d", i), Target: "acme"}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = l.AddRoute(admin, router.Route{Seq: 10, Match: "chat_jid=slack:A9", Target: "acme/a"})
	atLimit("route", err)

	for i := 0; i < 2; i++ {
		if _, err := l.AddGrant(admin, acl.Grant{Principal: fmt.Sprintf("user:u%d", i), Action: "mcp:send", Scope: "acme/**", Effect: acl.Allow}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = l.AddGrant(admin, acl.Grant{Principal: "user:u9", Action: "mcp:send", Scope: "acme/a", Effect: acl.Allow})
	atLimit("grant", err)

	if err := l.LimitObserve(admin, "acme/a"); err != nil {
		t.Fatal(err)
	}
	if err := l.Store().AddObserver(context.Background(), "acme/a", "acme/b"); err != nil {
		t.Fatal(err)
	}
	atLimit("observe", l.LimitObserve(admin, "acme/b"))

	if _, err := l.AddSchedule(admin, ScheduleIn{Folder: "acme/a", Cron: "@daily", Prompt: "p"}); err != nil {
		t.Fatal(err)
	}
	_, err = l.AddSchedule(admin, ScheduleIn{Folder: "acme", Cron: "@hourly", Prompt: "p"})
	atLimit("schedule", err)
	if _, err := l.AddHook(admin, HookIn{Folder: "acme"}); err != nil {
		t.Fatal(err)
	}
	_, err = l.AddHook(admin, HookIn{Folder: "acme/b"})
	atLimit("hook", err)
	if _, err := l.AddSchedule(admin, ScheduleIn{Folder: "globex", Cron: "@daily", Prompt: "p"}); err != nil {
		t.Fatalf("globex held by acme's limit: %v", err)
	}

	for i := 0; i < 4; i++ {
		if _, err := l.PostMessage(admin, MessageIn{ChatJID: "web:acme", Text: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = l.PostMessage(admin, MessageIn{ChatJID: "web:acme/a", Text: "one too many"})
	atLimit("message", err)
	if _, err := l.PostMessage(admin, MessageIn{ChatJID: "web:globex", Text: "globex is not held"}); err != nil {
		t.Fatal(err)
	}

	audit, _ := l.Store().ListAudit(context.Background(), 100)
	limits := map[string]bool{}
	for _, a := range audit {
		if strings.HasPrefix(a.Action, "limit:") && a.Scope == "acme" && a.Decision == "deny" {
			limits[a.Action] = true
		}
	}
	if len(limits) != 7 {
		t.Errorf("audited limits %v, want all seven", limits)
	}
	rec := httptest.NewRecorder()
	l.Metrics().ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, k := range []string{"folders", "routes", "grants", "observe", "messages_per_minute", "hooks", "schedules"} {
		if !strings.Contains(string(body), `arizuko_tenant_limit_refusals_total{limit="`+k+`"} 1`) {
			t.Errorf("metric for %s missing:\n%s", k, body)
		}
	}
}
