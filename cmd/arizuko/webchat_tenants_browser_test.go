package main

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/internal/webdriver"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// Two tenants log in to the web chat side by side in real Chromium, each
// with its tenant token: each picker offers its own folders only, each chat
// shows its own exchange and nothing of the other's, and a tenant's login
// asking for the other tenant's event stream is refused and audited.
func TestWebChatTenantsApartInChromium(t *testing.T) {
	wa, wg := browser(t), browser(t)
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	for _, f := range []string{"acme", "acme/eng", "globex"} {
		e.AddFolder(t, f, "python3", turn.DefaultGuestHome+"/agent.py")
		e.InstallAgent(t, f)
	}
	l, actx := e.L, e.Admin
	tok := map[string]string{}
	for _, ten := range []string{"acme", "globex"} {
		nt, err := l.AddToken(actx, service.TokenIn{Name: ten + "-web", Kind: service.KindTenant, Tenant: ten})
		if err != nil {
			t.Fatal(err)
		}
		tok[ten] = nt.Secret
	}
	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return hostProcess{} }
	defer func() { newTurnRunner = prev }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	h, stop, err := startTurns(ctx, TurnsConfig{}, l, "0123456789abcdef0123", base)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := &http.Server{Handler: h}
	go srv.Serve(ln)
	defer srv.Close()

	wait, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	must := func(wd *webdriver.Session, err error) {
		t.Helper()
		if err != nil {
			shot(t, wd)
			t.Fatal(err)
		}
	}
	login := func(wd *webdriver.Session, ten, other string) {
		t.Helper()
		must(wd, wd.Navigate(base+"/"))
		must(wd, wd.Type("#token", tok[ten]))
		must(wd, wd.Click("#login"))
		opts, err := wd.WaitText(wait, "#folder", ten)
		must(wd, err)
		if strings.Contains(opts, other) {
			t.Fatalf("%s's picker offers %s: %q", ten, other, opts)
		}
	}
	login(wa, "acme", "globex")
	login(wg, "globex", "acme")
	must(wa, wa.Type("#text", "acme private note"))
	must(wa, wa.Click("#send"))
	must(wg, wg.Type("#text", "globex launch plan"))
	must(wg, wg.Click("#send"))
	_, err = wa.WaitText(wait, "#log", "echo: acme private note")
	must(wa, err)
	_, err = wg.WaitText(wait, "#log", "echo: globex launch plan")
	must(wg, err)
	// A stream shows what was stored in order: once a message each tenant
	// sends now shows in its own chat, anything of the other's, stored
	// before it, would have shown too.
	for _, c := range []struct {
		wd   *webdriver.Session
		text string
	}{{wa, "acme checks in"}, {wg, "globex checks in"}} {
		must(c.wd, c.wd.Type("#text", c.text))
		must(c.wd, c.wd.Click("#send"))
		_, err = c.wd.WaitText(wait, "#log", c.text)
		must(c.wd, err)
	}
	for _, c := range []struct {
		wd           *webdriver.Session
		who, foreign string
	}{{wa, "acme", "globex launch plan"}, {wg, "globex", "acme private note"}} {
		log, err := c.wd.Text("#log")
		must(c.wd, err)
		if strings.Contains(log, c.foreign) {
			t.Errorf("%s's chat shows the other tenant's %q:\n%s", c.who, c.foreign, log)
		}
	}
	shot(t, wa)

	// globex's login asks for acme's event stream directly.
	req, _ := http.NewRequestWithContext(wait, "GET", base+"/v1/webchat/events?folder=acme", nil)
	req.Header.Set("Authorization", "Bearer "+tok["globex"])
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("globex's login subscribed to acme's chat: %d", resp.StatusCode)
	}
	audit, _ := l.Store().ListAudit(ctx, 100)
	if !containsDenial(audit, service.TokenPrincipal("globex-web"), "message:read", "acme") {
		t.Fatalf("the refused subscription was not audited: %+v", audit)
	}
}
