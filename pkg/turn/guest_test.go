package turn

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/acl"
	"github.com/crackbox/crackbox/pkg/delivery"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/jailtest"
	"github.com/crackbox/crackbox/pkg/store"
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
