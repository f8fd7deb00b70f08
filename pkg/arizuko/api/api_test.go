package api

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

const (
	adminToken = "admin-token-0123456789"
	devToken   = "dev-token-0123456789"
)

func newServer(t testing.TB) (*httptest.Server, *service.Local) {
	t.Helper()
	l := servicetest.New(t, servicetest.Options{Keyed: true}).L
	srv := httptest.NewServer(NewServer(l, map[string]string{adminToken: service.AdminPrincipal, devToken: "user:dev"}))
	t.Cleanup(srv.Close)
	return srv, l
}

type raw struct {
	status int
	body   string
}

func call(t *testing.T, srv *httptest.Server, method, path, auth, body string) raw {
	t.Helper()
	req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return raw{resp.StatusCode, string(b)}
}

// envelope checks the body is exactly {"error","message"} with the given code.
func envelope(t *testing.T, r raw, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(r.body), &m); err != nil {
		t.Fatalf("not JSON: %q", r.body)
	}
	if len(m) != 2 || m["error"] != code || m["message"] == "" {
		t.Fatalf("envelope %v, want error=%s and a message", m, code)
	}
}

func TestAuth(t *testing.T) {
	srv, _ := newServer(t)
	if r := call(t, srv, "GET", "/health", "", ""); r.status != 200 || !strings.Contains(r.body, "ok") ||
		!strings.Contains(r.body, `"build":"`+buildinfo.Get().String()+`"`) {
		t.Fatalf("health %+v, want status ok and the build", r)
	}
	for _, auth := range []string{"", "Bearer", "Bearer ", "Bearer wrong", "Basic " + adminToken, "bearer " + adminToken, "Bearer " + adminToken + "x"} {
		for _, ep := range []struct{ method, path string }{{"GET", "/v1/folders"}, {"POST", "/v1/messages"}, {"POST", "/v1/secrets"}, {"DELETE", "/v1/folders/a"}} {
			envelope(t, call(t, srv, ep.method, ep.path, auth, `{}`), 401, CodeUnauthorized)
		}
	}
	if r := call(t, srv, "GET", "/v1/folders", "Bearer "+adminToken, ""); r.status != 200 || r.body != "[]\n" {
		t.Fatalf("authorized list %+v", r)
	}
}

func TestBadInput(t *testing.T) {
	srv, _ := newServer(t)
	a := "Bearer " + adminToken
	cases := []struct {
		name, method, path, body string
		status                   int
		code, mention            string
	}{
		{"malformed", "POST", "/v1/folders", `{"path":`, 400, "invalid", "malformed JSON"},
		{"not an object", "POST", "/v1/folders", `[1,2]`, 400, "invalid", "malformed JSON"},
		{"unknown field", "POST", "/v1/folders", `{"path":"a","owner":"me"}`, 400, "invalid", `unknown field \"owner\"`},
		{"wrong type", "POST", "/v1/routes", `{"seq":"ten","target":"a"}`, 400, "invalid", "seq"},
		{"trailing data", "POST", "/v1/folders", `{"path":"a"} {"path":"b"}`, 400, "invalid", "after the JSON"},
		{"stray bracket after", "POST", "/v1/folders", `{"path":"a"}]`, 400, "invalid", "after the JSON"},
		{"empty body", "POST", "/v1/messages", ``, 400, "invalid", "empty"},
		{"huge body", "POST", "/v1/messages", `{"text":"` + strings.Repeat("x", MaxBody) + `"}`, 400, "invalid", "larger"},
		{"invalid folder", "POST", "/v1/folders", `{"path":"../etc"}`, 400, "invalid", "not allowed"},
		{"no chat", "POST", "/v1/messages", `{"text":"hi"}`, 400, "invalid", "chat_jid"},
		{"bad route", "POST", "/v1/routes", `{"match":"colour=red","target":"a"}`, 400, "invalid", "unknown key"},
		{"bad grant", "POST", "/v1/grants", `{"principal":"user:*","action":"x","scope":"**","effect":"allow"}`, 400, "invalid", "wildcard"},
		{"bad id", "DELETE", "/v1/routes/abc", ``, 400, "invalid", "positive integer"},
		{"bad after", "GET", "/v1/messages?chat=c&after=-1", ``, 400, "invalid", "after"},
		{"missing route", "DELETE", "/v1/routes/99", ``, 404, "not_found", "route 99"},
		{"missing folder", "DELETE", "/v1/folders/nope", ``, 404, "not_found", "nope"},
		{"method", "PUT", "/v1/folders", `{}`, 405, "method_not_allowed", "PUT"},
		{"unknown path", "GET", "/v2/x", ``, 404, "not_found", "/v2/x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := call(t, srv, c.method, c.path, a, c.body)
			envelope(t, r, c.status, c.code)
			if !strings.Contains(r.body, c.mention) {
				t.Fatalf("message does not mention %q: %s", c.mention, r.body)
			}
		})
	}
}

func TestDeniedIsAudited(t *testing.T) {
	srv, l := newServer(t)
	r := call(t, srv, "POST", "/v1/folders", "Bearer "+devToken, `{"path":"corp"}`)
	envelope(t, r, 403, "denied")
	a, err := l.Store().ListAudit(context.Background(), 10)
	if err != nil || len(a) != 1 || a[0].Principal != "user:dev" || a[0].Action != "folder:add" || a[0].Scope != "corp" {
		t.Fatalf("audit %+v %v", a, err)
	}
}

// TestClientRoundTrip runs the operations through Client, which the CLI uses,
// and checks secret values never appear in any response.
func TestClientRoundTrip(t *testing.T) {
	srv, _ := newServer(t)
	ctx := context.Background()
	c := NewClient(srv.URL, adminToken)
	if err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"corp", "corp/eng"} {
		if _, err := c.AddFolder(ctx, store.Folder{Path: p, AgentCommand: []string{"agent"}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.AddFolder(ctx, store.Folder{Path: "corp"}); !errors.Is(err, service.ErrConflict) {
		t.Fatalf("dup folder: %v", err)
	}
	rt, err := c.AddRoute(ctx, router.Route{Seq: 5, Match: "platform=tg", Target: "corp/eng#ops"})
	if err != nil {
		t.Fatal(err)
	}
	in, err := c.PostMessage(ctx, service.MessageIn{ChatJID: "tg:9", Platform: "tg", Sender: "u", Text: "hello"})
	if err != nil || in.Route.Folder != "corp/eng" || in.Route.Topic != "ops" || in.Message.ID == 0 {
		t.Fatalf("post %+v %v", in, err)
	}
	msgs, err := c.ListMessages(ctx, "tg:9", 0, 10)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "hello" {
		t.Fatalf("messages %+v %v", msgs, err)
	}
	if r, err := c.Resolve(ctx, service.MessageIn{ChatJID: "web:corp"}); err != nil || r.How != router.Direct {
		t.Fatalf("resolve %+v %v", r, err)
	}
	g, err := c.AddGrant(ctx, acl.Grant{Principal: "user:dev", Action: "mcp:*", Scope: "corp/**", Effect: acl.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.AddMember(ctx, acl.Edge{Member: "user:dev", Role: "role:eng"}); err != nil {
		t.Fatal(err)
	}
	if nr, err := c.SetNetworkRule(ctx, store.NetworkRule{Folder: "corp", Host: "GitHub.com", Effect: "allow"}); err != nil || nr.Host != "github.com" {
		t.Fatalf("network %+v %v", nr, err)
	}
	if v, err := c.ListNetwork(ctx, "corp/eng"); err != nil || len(v.Effective) != 1 {
		t.Fatalf("network view %+v %v", v, err)
	}
	if err := c.RemoveNetworkRule(ctx, "corp", "github.com."); err != nil {
		t.Fatal(err)
	}
	if v, err := c.ListNetwork(ctx, "corp/eng"); err != nil || len(v.Effective) != 0 {
		t.Fatalf("network view after rm %+v %v", v, err)
	}
	const value = "sup3r-s3cret-value"
	if err := c.SetSecret(ctx, service.SecretIn{Scope: "folder:corp", Name: "TOKEN", Value: value}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.RotateSecrets(ctx); err != nil || n != 0 {
		t.Fatalf("rotate %d %v", n, err)
	}
	for _, p := range []string{"/v1/secrets", "/v1/secrets?scope=folder:corp", "/v1/folders", "/v1/grants", "/v1/audit", "/v1/network?folder=corp", "/v1/messages?chat=tg:9"} {
		if r := call(t, srv, "GET", p, "Bearer "+adminToken, ""); r.status != 200 || strings.Contains(r.body, value) {
			t.Fatalf("GET %s: %d, leaks value: %v", p, r.status, strings.Contains(r.body, value))
		}
	}
	names, err := c.ListSecrets(ctx, "folder:corp")
	if err != nil || len(names) != 1 || names[0].Name != "TOKEN" {
		t.Fatalf("names %+v %v", names, err)
	}
	dev := NewClient(srv.URL, devToken)
	if _, err := dev.ListFolders(ctx); !errors.Is(err, service.ErrDenied) {
		t.Fatalf("dev list: %v", err)
	}
	if err := c.RemoveRoute(ctx, rt.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveRoute(ctx, rt.ID); !errors.Is(err, service.ErrNotFound) {
		t.Fatalf("remove twice: %v", err)
	}
	if err := c.RemoveGrant(ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveSecret(ctx, "folder:corp", "TOKEN"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveFolder(ctx, "corp"); !errors.Is(err, service.ErrInvalid) {
		t.Fatalf("remove parent: %v", err)
	}
	if err := c.RemoveFolder(ctx, "corp/eng"); err != nil {
		t.Fatal(err)
	}
	if err := c.RemoveMember(ctx, acl.Edge{Member: "user:dev", Role: "role:eng"}); err != nil {
		t.Fatal(err)
	}
}
