package turn

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
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

// slotRunner holds one of jailtest's machine-wide guest slots per attempt.
type slotRunner struct {
	inner Runner
	mu    sync.Mutex
	boots int
}

func (r *slotRunner) Run(ctx context.Context, j Job) (Result, error) {
	release, err := jailtest.Acquire(ctx)
	if err != nil {
		return Result{Exit: jail.ExitFailed}, err
	}
	defer release()
	r.mu.Lock()
	r.boots++
	r.mu.Unlock()
	return r.inner.Run(ctx, j)
}

type testAdapter struct {
	srv *httptest.Server
	got chan delivery.Payload
}

func newTestAdapter(t *testing.T) *testAdapter {
	a := &testAdapter{got: make(chan delivery.Payload, 16)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p delivery.Payload
		if r.URL.Path != "/send" || json.NewDecoder(r.Body).Decode(&p) != nil {
			http.Error(w, "bad request", 400)
			return
		}
		a.got <- p
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *testAdapter) next(t *testing.T, timeout time.Duration) delivery.Payload {
	t.Helper()
	select {
	case p := <-a.got:
		return p
	case <-time.After(timeout):
		t.Fatal("no message reached the adapter")
	}
	return delivery.Payload{}
}

// One story in two real guests: a routed message runs corp's scripted agent,
// which delegates to corp/eng over its MCP socket and replies; corp/eng then
// runs in its own guest, tries a tool it holds no grant for, is denied (and
// audited), and its reply reaches the chat corp named. Both replies travel
// through delivery to an HTTP adapter.
func TestGuestTurnsDelegateDenyDeliver(t *testing.T) {
	jenv := jailtest.Require(t)
	e := newEnv(t, "", "corp", "corp/eng")
	ctx := context.Background()
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:corp", Action: "mcp:delegate_group", Scope: "corp/*", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	// corp may name room9 for its child's reply because room9 is corp's chat.
	if _, err := e.l.AddRoute(e.ctx, router.Route{Seq: 10, Match: "chat_jid=test:room9", Target: "corp"}); err != nil {
		t.Fatal(err)
	}
	a := newTestAdapter(t)
	if err := e.st.SetAdapter(ctx, store.Adapter{Platform: "test", CallbackURL: a.srv.URL}); err != nil {
		t.Fatal(err)
	}
	d := delivery.New(delivery.Options{Store: e.st, Poll: 100 * time.Millisecond})
	dctx, stop := context.WithCancel(ctx)
	defer stop()
	go d.Run(dctx)

	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 3 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:corp", `DELEGATE corp/eng test:room9 TRY observe_group {"source": "corp"}`)

	timeout := 4 * time.Minute
	got := map[string]string{}
	for range 2 {
		p := a.next(t, timeout)
		got[p.ChatJID] = p.Text
	}
	if r := got["web:corp"]; !strings.HasPrefix(r, "delegated: message") || !strings.Contains(r, "queued for corp/eng") {
		t.Fatalf("corp's reply %q", r)
	}
	if r := got["test:room9"]; !strings.HasPrefix(r, "denied: ") || !strings.Contains(r, "permission denied") || !strings.Contains(r, "mcp:observe_group") {
		t.Fatalf("corp/eng's reply %q", r)
	}
	audit, _ := e.st.ListAudit(ctx, 20)
	found := false
	for _, x := range audit {
		if x.Principal == "folder:corp/eng" && x.Action == "mcp:observe_group" && x.Scope == "corp" && x.Decision == "deny" {
			found = true
		}
	}
	if !found {
		t.Fatalf("denial not audited: %+v", audit)
	}
	for _, f := range []string{"corp", "corp/eng"} {
		ts := e.waitTurns(t, f, 1)
		if ts[0].Status != store.TurnDone || ts[0].ExitCode == nil || *ts[0].ExitCode != 0 || ts[0].SessionID == "" {
			t.Fatalf("%s turn %+v", f, ts[0])
		}
		if f == "corp/eng" && ts[0].Depth != 1 {
			t.Fatalf("child turn depth %d, want 1", ts[0].Depth)
		}
	}
	if runner.boots != 2 {
		t.Fatalf("%d guests booted, want 2", runner.boots)
	}
}

// A folder's guest sees its own socket and home and nothing of another
// folder's; only granted secrets reach its env; observed folders' messages
// are in its prompt; egress off the allowlist is refused and summarized in
// the turn record.
func TestGuestIsolationSecretsObserve(t *testing.T) {
	jenv := jailtest.Require(t)
	e := newEnv(t, "", "a", "b")
	ctx := context.Background()
	for k, v := range map[string]string{"GRANTED_KEY": "granted-s1", "HIDDEN_KEY": "hidden-s2"} {
		if err := e.l.SetSecret(e.ctx, service.SecretIn{Scope: "folder:a", Name: k, Value: v}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:a", Action: "shell:env:GRANTED_KEY", Scope: "{self}", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddObserver(ctx, "a", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:a", Action: "mcp:observe_group", Scope: "b", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.PutMessage(ctx, store.Message{ChatJID: "test:b", Text: "chatter in b", Folder: "b", How: "observe"}); err != nil {
		t.Fatal(err)
	}
	bDir := filepath.Join(e.data, "homes", "b")
	if err := os.WriteFile(filepath.Join(bDir, "private.txt"), []byte("b only"), 0o600); err != nil {
		t.Fatal(err)
	}
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 3 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:a", "PROBE")
	ts := e.waitTurns(t, "a", 1)
	outs, _ := e.st.TurnOutbound(ctx, ts[0].ID)
	if ts[0].Status != store.TurnDone || len(outs) != 1 {
		t.Fatalf("turn %+v outbound %+v", ts[0], outs)
	}
	got := outs[0].Text
	t.Logf("probe reply: %s", got)
	for _, want := range []string{"/run/ipc=gated.sock ", "/home=node ", "fetch=HTTPError ", "env=GRANTED_KEY ", "[observed b:1]"} {
		if !strings.Contains(got, want) {
			t.Errorf("probe %q lacks %q", got, want)
		}
	}
	if strings.Contains(got, "HIDDEN_KEY") || strings.Contains(got, "private") {
		t.Errorf("probe %q saw what it must not", got)
	}
	// The proxy refused the host off the allowlist, and the turn record says so.
	if !strings.Contains(ts[0].Egress, "blocked.invalid") {
		t.Errorf("egress summary %q does not name the blocked host", ts[0].Egress)
	}
	b, err := os.ReadFile(filepath.Join(e.data, "homes", "a", "probe.txt"))
	if err != nil || strings.TrimSpace(string(b)) != "a" {
		t.Fatalf("probe.txt in a's folder: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(bDir, "probe.txt")); !os.IsNotExist(err) {
		t.Fatalf("a's guest wrote into b's folder: %v", err)
	}
}

// Escalation in real guests: corp/eng's agent asks its parent, and corp's
// agent, in its own guest, answers the named chat.
func TestGuestEscalationReachesParent(t *testing.T) {
	jenv := jailtest.Require(t)
	e := newEnv(t, "", "corp", "corp/eng")
	ctx := context.Background()
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:corp/eng", Action: "mcp:escalate_group", Scope: "corp", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddRoute(e.ctx, router.Route{Seq: 10, Match: "chat_jid=test:room1", Target: "corp/eng"}); err != nil {
		t.Fatal(err)
	}
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetNone,
		Timeout: 3 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:corp/eng", "ESCALATE test:room1 need a budget decision")
	parent := e.waitTurns(t, "corp", 1)
	child := e.waitTurns(t, "corp/eng", 1)
	texts := func(id int64) string {
		outs, _ := e.st.TurnOutbound(ctx, id)
		var s []string
		for _, o := range outs {
			s = append(s, o.ChatJID+"="+o.Text)
		}
		return strings.Join(s, "|")
	}
	if got := texts(child[0].ID); !strings.HasPrefix(got, "web:corp/eng=escalated: message") {
		t.Fatalf("child replies %q", got)
	}
	if got := texts(parent[0].ID); got != "test:room1=echo: [escalated from corp/eng] need a budget decision" {
		t.Fatalf("parent replies %q", got)
	}
	if parent[0].Depth != 1 || runner.boots != 2 {
		t.Fatalf("parent depth %d, %d guests", parent[0].Depth, runner.boots)
	}
}
