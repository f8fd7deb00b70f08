package hook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

type env struct {
	*servicetest.Env
	url string
}

// newEnv serves the hook endpoint of a keyed data dir with tenants acme and globex.
func newEnv(t *testing.T) *env {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{Keyed: true})
	e.AddFolder(t, "acme")
	e.AddFolder(t, "globex")
	s := api.NewServer(e.L, map[string]string{"0123456789abcdef0123": service.AdminPrincipal}).WithTokens(e.L)
	New(e.L, e.L.PostMessage).Register(s)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &env{Env: e, url: srv.URL}
}

func (e *env) hook(t *testing.T, ctx context.Context, in service.HookIn) service.NewHook {
	t.Helper()
	h, err := e.L.AddHook(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// post sends one delivery; hdr is "Name: value" pairs.
func (e *env) post(t *testing.T, path, ctype, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", e.url+path, strings.NewReader(body))
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func sign(secret, body string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(body))
	return "X-Hub-Signature-256: sha256=" + hex.EncodeToString(m.Sum(nil))
}

// inbox is the text of every message in a folder's chat.
func (e *env) inbox(t *testing.T, f string) []string {
	t.Helper()
	ms, err := e.Store.ListMessages(context.Background(), "web:"+f, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, m := range ms {
		if m.Folder != f {
			t.Fatalf("message %d of web:%s is in folder %q", m.ID, f, m.Folder)
		}
		out = append(out, m.Text)
	}
	return out
}

func (e *env) denials(t *testing.T, principal string) []store.AuditEntry {
	t.Helper()
	all, err := e.Store.ListAudit(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.AuditEntry
	for _, a := range all {
		if a.Principal == principal && a.Decision == "deny" {
			out = append(out, a)
		}
	}
	return out
}

// A signed hook takes a correctly signed JSON body once: a wrong or missing
// signature is 401 and audited, the same signed body again (under a new
// delivery id) is a replay, 409, audited; nothing of them is stored.
func TestSignedHook(t *testing.T) {
	e := newEnv(t)
	h := e.hook(t, e.Admin, service.HookIn{Folder: "acme", Signed: true})
	if h.Secret == "" || !strings.HasPrefix(h.Path, "/hook/"+service.HookPrefix) {
		t.Fatalf("signed hook %+v: want a secret and a /hook/azh_ path", h)
	}
	body := `{"action":"opened","number":7}`
	cases := []struct {
		name, body string
		hdr        []string
		status     int
	}{
		{"no signature", body, nil, 401},
		{"wrong secret", body, []string{sign("whsec_guess", body)}, 401},
		{"signature of another body", `{"action":"closed"}`, []string{sign(h.Secret, body)}, 401},
		{"not hex", body, []string{"X-Hub-Signature-256: sha256=zz"}, 401},
		{"sha1 style", body, []string{"X-Hub-Signature-256: sha1=00"}, 401},
		{"good", body, []string{sign(h.Secret, body), "X-GitHub-Delivery: d-1"}, 202},
		{"replayed", body, []string{sign(h.Secret, body), "X-GitHub-Delivery: d-1"}, 409},
		{"replayed under a new delivery id", body, []string{sign(h.Secret, body), "X-GitHub-Delivery: d-2"}, 409},
	}
	for _, c := range cases {
		if status, got := e.post(t, h.Path, "application/json", c.body, c.hdr...); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, got, c.status)
		}
	}
	if got := e.inbox(t, "acme"); len(got) != 1 || got[0] != body {
		t.Fatalf("acme's chat %q, want the one signed body", got)
	}
	if n := len(e.denials(t, service.HookPrincipal(h.ID))); n != 7 {
		t.Fatalf("%d refusals audited, want 7 (5 signatures, 2 replays)", n)
	}
}

// Every way in that is not a good delivery: each gets its status and stores nothing.
func TestHookRefusals(t *testing.T) {
	e := newEnv(t)
	h := e.hook(t, e.Admin, service.HookIn{Folder: "acme"})
	gone := e.hook(t, e.Admin, service.HookIn{Folder: "acme"})
	if err := e.L.RemoveHook(e.Admin, gone.ID); err != nil {
		t.Fatal(err)
	}
	big := `{"x":"` + strings.Repeat("a", MaxBody) + `"}`
	cases := []struct {
		name, path, ctype, body string
		hdr                     []string
		status                  int
	}{
		{"revoked token", gone.Path, "application/json", `{}`, nil, 404},
		{"guessed token", "/hook/" + service.HookPrefix + "guess", "application/json", `{}`, nil, 404},
		{"token without prefix", "/hook/" + strings.TrimPrefix(h.Path, "/hook/"+service.HookPrefix), "application/json", `{}`, nil, 404},
		{"oversized body", h.Path, "application/json", big, nil, 413},
		{"empty body", h.Path, "application/json", ``, nil, 400},
		{"not JSON", h.Path, "application/json", `{"a":`, nil, 415},
		{"not UTF-8", h.Path, "text/plain", "caf\xe9", nil, 415},
		{"unknown type", h.Path, "application/octet-stream", `x`, nil, 415},
		{"bad delivery id", h.Path, "text/plain", `x`, []string{"X-Hook-Delivery: a b"}, 400},
		{"delivery", h.Path, "text/plain", `deploy done`, []string{"X-Hook-Delivery: 1"}, 202},
		{"same delivery id", h.Path, "text/plain", `deploy done again`, []string{"X-Hook-Delivery: 1"}, 409},
	}
	for _, c := range cases {
		if status, got := e.post(t, c.path, c.ctype, c.body, c.hdr...); status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, status, got, c.status)
		}
	}
	if got := e.inbox(t, "acme"); len(got) != 1 || got[0] != "deploy done" {
		t.Fatalf("acme's chat %q, want only the one delivery", got)
	}
}

// JSON is kept as sent, a form becomes "key: value" lines, and GitHub's
// form delivery (one payload field) is its JSON.
func TestHookBodies(t *testing.T) {
	e := newEnv(t)
	h := e.hook(t, e.Admin, service.HookIn{Folder: "acme"})
	for _, c := range []struct{ ctype, body string }{
		{"application/json; charset=utf-8", `{"ok":true}`},
		{"application/x-www-form-urlencoded", `b=2&a=1&a=x`},
		{"application/x-www-form-urlencoded", `payload=%7B%22zen%22%3A1%7D`},
		{"", `plain words`},
	} {
		if status, got := e.post(t, h.Path, c.ctype, c.body); status != 202 {
			t.Fatalf("%s %q: %d %s", c.ctype, c.body, status, got)
		}
	}
	want := []string{`{"ok":true}`, "a: 1\na: x\nb: 2\n", `{"zen":1}`, "plain words"}
	if got := e.inbox(t, "acme"); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("texts %q, want %q", got, want)
	}
}

// A hook takes its per_minute deliveries and then answers 429 with
// Retry-After; another hook keeps its own allowance.
func TestHookFlood(t *testing.T) {
	e := newEnv(t)
	h := e.hook(t, e.Admin, service.HookIn{Folder: "acme", PerMinute: 5})
	other := e.hook(t, e.Admin, service.HookIn{Folder: "acme", PerMinute: 5})
	codes := map[int]int{}
	for range 50 {
		status, _ := e.post(t, h.Path, "text/plain", "ping")
		codes[status]++
	}
	if codes[202] != 5 || codes[429] != 45 {
		t.Fatalf("50 posts: %v, want 5 accepted and 45 refused with 429", codes)
	}
	req, _ := http.NewRequest("POST", e.url+h.Path, strings.NewReader("x"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("flooded: %d Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	if status, got := e.post(t, other.Path, "text/plain", "pong"); status != 202 {
		t.Fatalf("the other hook: %d %s", status, got)
	}
	if n := len(e.inbox(t, "acme")); n != 6 {
		t.Fatalf("%d messages stored, want 6", n)
	}
}

// Tenant acme's token makes hooks into acme only; its hook posts into acme
// whatever the body names; globex's list does not show it; once acme's
// token is revoked its hook posts nothing.
func TestHookTenancy(t *testing.T) {
	e := newEnv(t)
	acme, err := e.L.AddToken(e.Admin, service.TokenIn{Name: "acme-ops", Kind: service.KindTenant, Tenant: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.L.AddToken(e.Admin, service.TokenIn{Name: "globex-ops", Kind: service.KindTenant, Tenant: "globex"}); err != nil {
		t.Fatal(err)
	}
	actx := service.WithPrincipal(context.Background(), service.TokenPrincipal(acme.Name))
	gctx := service.WithPrincipal(context.Background(), service.TokenPrincipal("globex-ops"))
	if _, err := e.L.AddHook(actx, service.HookIn{Folder: "globex"}); service.Code(err) != service.CodeDenied {
		t.Fatalf("acme's token made a hook into globex: %v", err)
	}
	if _, err := e.L.AddHook(actx, service.HookIn{Folder: "globex/sub"}); service.Code(err) != service.CodeDenied {
		t.Fatalf("acme's token made a hook below globex: %v", err)
	}
	h := e.hook(t, actx, service.HookIn{Folder: "acme"})
	if status, got := e.post(t, h.Path, "application/json", `{"chat_jid":"web:globex","folder":"globex"}`); status != 202 {
		t.Fatalf("acme's hook: %d %s", status, got)
	}
	if got := e.inbox(t, "globex"); len(got) != 0 {
		t.Fatalf("acme's hook reached globex: %q", got)
	}
	if got := e.inbox(t, "acme"); len(got) != 1 {
		t.Fatalf("acme's chat %q, want the delivery", got)
	}
	if hs, err := e.L.ListHooks(gctx); err != nil || len(hs) != 0 {
		t.Fatalf("globex lists %+v %v, want none of acme's", hs, err)
	}
	if err := e.L.RemoveHook(gctx, h.ID); service.Code(err) != service.CodeDenied {
		t.Fatalf("globex revoked acme's hook: %v", err)
	}
	if err := e.L.RemoveToken(e.Admin, acme.Name); err != nil {
		t.Fatal(err)
	}
	if status, got := e.post(t, h.Path, "application/json", `{"after":"revocation"}`); status != 403 {
		t.Fatalf("the hook of a revoked token: %d %s, want 403", status, got)
	}
	if got := e.inbox(t, "acme"); len(got) != 1 {
		t.Fatalf("acme's chat %q after the owner's revocation", got)
	}
}

// Only the SHA-256 of a hook's token is stored, and its secret only sealed.
func TestHookTokenStoredHashed(t *testing.T) {
	e := newEnv(t)
	h := e.hook(t, e.Admin, service.HookIn{Folder: "acme", Signed: true})
	var all []byte
	files, _ := filepath.Glob(filepath.Join(e.Data, service.DBFile+"*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	for _, s := range []string{strings.TrimPrefix(h.Token, service.HookPrefix)[:16], strings.TrimPrefix(h.Secret, "whsec_")[:16]} {
		if bytes.Contains(all, []byte(s)) {
			t.Fatalf("the database files %v hold %q in clear", files, s)
		}
	}
	sum := sha256.Sum256([]byte(h.Token))
	if !bytes.Contains(all, sum[:]) {
		t.Fatalf("the token's SHA-256 is not in the database files %v", files)
	}
}
