package webchat

import (
	"bufio"
	"context"
	"encoding/json"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

const admin = "admin-token-0123456789"

func newChat(t *testing.T) (*httptest.Server, *service.Local, *Chat) {
	t.Helper()
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	e.AddFolder(t, "acme")
	l := e.L
	s := api.NewServer(l, map[string]string{admin: service.AdminPrincipal}).WithTokens(l)
	c := New(l, l.PostMessage, 20*time.Millisecond)
	c.Register(s)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	if err := c.Attach(ctx, srv.URL); err != nil {
		t.Fatal(err)
	}
	return srv, l, c
}

func do(t *testing.T, method, url, body string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(method, url, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// The event stream carries the sent line, typing while a turn is open, the
// reply, and a notice when a turn fails.
func TestEventStream(t *testing.T) {
	srv, l, _ := newChat(t)
	ctx := context.Background()
	st := l.Store()
	ctx2, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx2, "GET", srv.URL+"/v1/webchat/events?folder=acme", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("events: %v %v", resp, err)
	}
	defer resp.Body.Close()
	events := make(chan Event, 16)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				var e Event
				json.Unmarshal([]byte(d), &e)
				events <- e
			}
		}
		close(events)
	}()
	next := func(what string, ok func(Event) bool) {
		t.Helper()
		for {
			select {
			case e, open := <-events:
				if !open {
					t.Fatalf("stream ended waiting for %s", what)
				}
				if ok(e) {
					return
				}
			case <-ctx2.Done():
				t.Fatalf("no %s", what)
			}
		}
	}
	r := do(t, "POST", srv.URL+"/v1/webchat/messages", `{"folder":"acme","text":"hi there"}`)
	r.Body.Close()
	if r.StatusCode != 201 {
		t.Fatalf("send: %s", r.Status)
	}
	next("the sent line", func(e Event) bool {
		return e.Message != nil && e.Message.Text == "hi there" && e.Message.Platform == Platform
	})
	tr, err := st.CreateTurn(ctx, "acme", "", 1, 1)
	if err != nil {
		t.Fatal(err)
	}
	next("typing on", func(e Event) bool { return e.Typing != nil && *e.Typing })
	if _, err := st.PutOutbound(ctx, store.Outbound{ChatJID: "web:acme", Folder: "acme", Text: "hello back", TurnID: tr.ID}); err != nil {
		t.Fatal(err)
	}
	next("the reply", func(e Event) bool {
		return e.Message != nil && e.Message.Text == "hello back" && e.Message.Direction == "out"
	})
	if err := st.FinishTurn(ctx, tr.ID, store.TurnEnd{Status: store.TurnFailed, Error: "agent exited 1"}); err != nil {
		t.Fatal(err)
	}
	next("the failure notice", func(e Event) bool { return strings.Contains(e.Notice, "agent exited 1") })
}

// The delivery hook answers only at its secret path and only signed calls,
// so nothing else on the host can stand in for the web chat's adapter or
// forge a call to it; past that it passes the adapter conformance kit.
func TestHookNeedsItsSecret(t *testing.T) {
	srv, l, c := newChat(t)
	a, err := l.Store().GetAdapter(context.Background(), Platform)
	if err != nil || a.CallbackURL != srv.URL+"/webchat/hook/"+c.secret {
		t.Fatalf("adapter %+v %v", a, err)
	}
	flipped := c.secret[:len(c.secret)-1] + map[bool]string{true: "1", false: "0"}[strings.HasSuffix(c.secret, "0")]
	for path, want := range map[string]int{
		"/webchat/hook/" + c.secret + "/send": 401,
		"/webchat/hook/" + flipped + "/send":  404,
		"/webchat/hook//send":                 404,
	} {
		resp, err := http.Post(srv.URL+path, "application/json", strings.NewReader(`{"id":1,"chat_jid":"web:acme","text":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want && !(want == 404 && resp.StatusCode >= 400) {
			t.Errorf("POST %s: %s, want %d", path, resp.Status, want)
		}
	}
	rs, err := adapter.Check(context.Background(), adapter.KitConfig{URL: a.CallbackURL, Secret: a.Secret, Chat: "web:acme"})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	adapter.PrintTable(&table, rs)
	if !adapter.Passed(rs) {
		t.Fatalf("the web chat fails the adapter conformance kit:\n%s", table.String())
	}
	t.Logf("web chat conformance:\n%s", table.String())
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("page CSP %q", csp)
	}
}
