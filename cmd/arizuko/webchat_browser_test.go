package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/internal/webdriver"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/jail"
)

// slotRunner holds one of jailtest's machine-wide guest slots per attempt.
type slotRunner struct{ inner turn.Runner }

func (r slotRunner) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	release, err := jailtest.Acquire(ctx)
	if err != nil {
		return turn.Result{Exit: jail.ExitFailed}, err
	}
	defer release()
	return r.inner.Run(ctx, j)
}

// browser starts headless Chromium through chromedriver; a missing browser stops the
// test through testreq (a failure under make test).
func browser(t *testing.T) *webdriver.Session {
	t.Helper()
	_, _, err := webdriver.Find()
	testreq.Check(t, err, "chromium and chromedriver", "make deps (scripts/deps.sh) installs them")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s, err := webdriver.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// The web chat in a real browser against the daemon's handler: log in with
// a token, pick the folder, send a line, see the agent (the scripted agent
// in a real guest) type and answer; then, after the operator denies the token
// message:post on the folder, see the denial notice for the next line.
func TestWebChatInChromium(t *testing.T) {
	jenv := jailtest.Require(t)
	wd := browser(t)
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	for _, f := range []string{"acme", "globex"} {
		e.AddFolder(t, f, "python3", turn.DefaultGuestHome+"/agent.py")
	}
	e.InstallAgent(t, "acme")
	l, actx := e.L, e.Admin
	nt, err := l.AddToken(actx, service.TokenIn{Name: "alice", Kind: service.KindAdmin})
	if err != nil {
		t.Fatal(err)
	}
	// alice may message acme only.
	if _, err := l.AddGrant(actx, acl.Grant{Principal: service.TokenPrincipal("alice"), Action: "message:post", Scope: "globex", Effect: acl.Deny}); err != nil {
		t.Fatal(err)
	}

	prev := newTurnRunner
	newTurnRunner = func(tc TurnsConfig) turn.Runner { return slotRunner{prev(tc)} }
	defer func() { newTurnRunner = prev }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	tc := TurnsConfig{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: "proxy-only", MaxConcurrentGuests: 1}
	tc.TurnTimeout.Duration = 3 * time.Minute
	h, stop, err := startTurns(ctx, tc, l, "0123456789abcdef0123", base)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()

	// Generous: the guest may wait for one of the machine's two slots.
	wait, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	must := func(err error) {
		t.Helper()
		if err != nil {
			shot(t, wd)
			ts, _ := l.Store().ListTurns(ctx, "", 10)
			for _, tr := range ts {
				t.Logf("turn %d %s: %s attempts %d outcome %q error %q", tr.ID, tr.Folder, tr.Status, tr.Attempts, tr.Outcome, tr.Error)
			}
			t.Fatal(err)
		}
	}
	must(wd.Navigate(base + "/"))
	must(wd.Type("#token", "azk_not-a-token"))
	must(wd.Click("#login"))
	_, err = wd.WaitText(wait, "#login-error", "unknown or revoked")
	must(err)

	must(wd.Navigate(base + "/"))
	must(wd.Type("#token", nt.Secret))
	must(wd.Click("#login"))
	opts, err := wd.WaitText(wait, "#folder", "acme")
	must(err)
	if strings.Contains(opts, "globex") {
		t.Fatalf("the picker offers globex, which alice may not message: %q", opts)
	}
	must(wd.Type("#text", "hello from the browser"))
	must(wd.Click("#send"))
	_, err = wd.WaitText(wait, "#typing", "acme is typing")
	must(err)
	_, err = wd.WaitText(wait, "#log", "echo: hello from the browser")
	must(err)
	shot(t, wd)

	// The operator revokes alice's right to message acme mid-chat.
	if _, err := l.AddGrant(actx, acl.Grant{Principal: service.TokenPrincipal("alice"), Action: "message:post", Scope: "acme", Effect: acl.Deny}); err != nil {
		t.Fatal(err)
	}
	must(wd.Type("#text", "this one is refused"))
	must(wd.Click("#send"))
	notice, err := wd.WaitText(wait, "#notice", "Denied")
	must(err)
	if !strings.Contains(notice, "message:post") {
		t.Fatalf("denial notice %q does not say what was denied", notice)
	}
	ms, _ := l.Store().ListMessages(ctx, "web:acme", 0, 0)
	for _, m := range ms {
		if m.Text == "this one is refused" {
			t.Fatal("a denied message was stored")
		}
	}
	shot(t, wd)
	audit, _ := l.Store().ListAudit(ctx, 50)
	if !containsDenial(audit, service.TokenPrincipal("alice"), "message:post", "acme") {
		t.Fatalf("the denial was not audited: %+v", audit)
	}
}

func containsDenial(audit []store.AuditEntry, principal, action, scope string) bool {
	for _, a := range audit {
		if a.Principal == principal && a.Action == action && a.Scope == scope && a.Decision == "deny" {
			return true
		}
	}
	return false
}

// shot saves a screenshot of the page to $WEBCHAT_SCREENSHOT, or the test's
// temp dir, and logs where.
func shot(t *testing.T, wd *webdriver.Session) {
	t.Helper()
	p := os.Getenv("WEBCHAT_SCREENSHOT")
	if p == "" {
		p = filepath.Join(t.TempDir(), "webchat.png")
	}
	if err := wd.Screenshot(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Logf("screenshot: %v", err)
		return
	}
	t.Logf("screenshot: %s", p)
}
