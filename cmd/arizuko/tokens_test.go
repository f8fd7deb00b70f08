package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// The pipeline's endpoints (adapters, turns, budgets) sit behind the same
// scoped tokens as the core API: an adapter token cannot point another
// platform's deliveries at itself, a read token cannot change a budget.
func TestScopedTokensOnPipelineRoutes(t *testing.T) {
	ctx := context.Background()
	e := servicetest.New(t, servicetest.Options{})
	e.AddFolder(t, "a")
	l, actx := e.L, e.Admin
	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return hostProcess{} }
	defer func() { newTurnRunner = prev }()
	h, stop, err := startTurns(ctx, TurnsConfig{}, l, "0123456789abcdef0123", "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := httptest.NewServer(h)
	defer srv.Close()
	tok := func(in service.TokenIn) string {
		nt, err := l.AddToken(actx, in)
		if err != nil {
			t.Fatal(err)
		}
		return nt.Secret
	}
	read := tok(service.TokenIn{Name: "dash", Kind: service.KindRead})
	slack := tok(service.TokenIn{Name: "slack", Kind: service.KindAdapter, Platform: "slack"})
	cases := []struct {
		name, token, method, path, body string
		status                          int
	}{
		{"read lists turns", read, "GET", "/v1/turns?folder=a", "", 200},
		{"read shows a budget", read, "GET", "/v1/budgets/a", "", 200},
		{"read sets a budget", read, "PUT", "/v1/budgets/a", `{"max_turns_per_day":0}`, 403},
		{"read registers an adapter", read, "POST", "/v1/adapters", `{"platform":"tg","callback_url":"http://127.0.0.1:1"}`, 403},
		{"adapter takes over another platform's deliveries", slack, "POST", "/v1/adapters", `{"platform":"tg","callback_url":"http://127.0.0.1:1"}`, 403},
		{"adapter re-points its own deliveries", slack, "POST", "/v1/adapters", `{"platform":"slack","callback_url":"http://127.0.0.1:1"}`, 403},
		{"adapter removes an adapter", slack, "DELETE", "/v1/adapters/tg", "", 403},
		{"adapter lists turns", slack, "GET", "/v1/turns", "", 403},
		{"adapter posts", slack, "POST", "/v1/messages", `{"chat_jid":"slack:1","text":"hi"}`, 201},
		{"adapter posts through the web chat", slack, "POST", "/v1/webchat/messages", `{"folder":"a","text":"hi"}`, 403},
		{"read posts through the web chat", read, "POST", "/v1/webchat/messages", `{"folder":"a","text":"hi"}`, 403},
		{"read follows the web chat", read, "GET", "/v1/webchat/folders", "", 200},
		{"forged delivery to the web chat", "", "POST", "/webchat/hook/0123456789abcdef0123456789abcdef/send", `{"id":1,"chat_jid":"web:a","text":"x"}`, 404},
	}
	for _, c := range cases {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, strings.NewReader(c.body))
		req.Header.Set("Authorization", "Bearer "+c.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s: %s, want %d", c.name, resp.Status, c.status)
		}
	}
	if _, err := l.Store().GetAdapter(ctx, "tg"); err == nil {
		t.Fatal("a refused request registered an adapter")
	}
}
