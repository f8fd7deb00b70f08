package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// newTokenServer serves the API with the store's scoped tokens and returns
// an admin context on the same service for set-up.
func newTokenServer(t *testing.T) (*httptest.Server, *service.Local, *Server, context.Context) {
	t.Helper()
	_, l := newServer(t)
	s := NewServer(l, map[string]string{adminToken: service.AdminPrincipal}).WithTokens(l)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv, l, s, service.WithPrincipal(context.Background(), service.AdminPrincipal)
}

func addToken(t *testing.T, l *service.Local, ctx context.Context, in service.TokenIn) string {
	t.Helper()
	nt, err := l.AddToken(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(nt.Secret, service.TokenPrefix) || len(nt.Secret) < 40 {
		t.Fatalf("token %q: want %s and 32 random bytes", nt.Secret, service.TokenPrefix)
	}
	return nt.Secret
}

// concrete turns a route pattern into a path a request can hit.
func concrete(p string) string {
	return strings.NewReplacer("{id}", "1", "{path...}", "x", "{folder...}", "x", "{name}", "x", "{platform}", "x").Replace(p)
}

// Every token kind against every registered route: a class the kind may not
// use answers 403 before any handler runs; one it may use never does.
func TestTokenKindsAgainstEveryRoute(t *testing.T) {
	srv, l, s, ctx := newTokenServer(t)
	tokens := map[string]string{
		"file-admin": adminToken,
		"admin":      addToken(t, l, ctx, service.TokenIn{Name: "ops", Kind: service.KindAdmin}),
		"read":       addToken(t, l, ctx, service.TokenIn{Name: "dash", Kind: service.KindRead}),
		"adapter":    addToken(t, l, ctx, service.TokenIn{Name: "slack", Kind: service.KindAdapter, Platform: "slack"}),
	}
	kindOf := map[string]string{"file-admin": service.KindAdmin, "admin": service.KindAdmin, "read": service.KindRead, "adapter": service.KindAdapter}
	want := map[string]map[Class]bool{
		service.KindAdmin:   {Read: true, Write: true, Ingest: true, Outbound: true},
		service.KindRead:    {Read: true, Outbound: true},
		service.KindAdapter: {Ingest: true, Outbound: true},
	}
	seen := map[Class]bool{}
	for _, rt := range s.Routes() {
		seen[rt.Class] = true
		if rt.Class == Public {
			continue
		}
		for who, tok := range tokens {
			r := call(t, srv, rt.Method, concrete(rt.Path), "Bearer "+tok, "{}")
			allowed := want[kindOf[who]][rt.Class]
			denied := r.status == 403 && strings.Contains(r.body, "token")
			switch {
			case r.status == 401:
				t.Errorf("%s %s as %s: 401 %s", rt.Method, rt.Path, who, r.body)
			case allowed && denied:
				t.Errorf("%s %s (%s) as %s: refused: %s", rt.Method, rt.Path, rt.Class, who, r.body)
			case !allowed && !denied:
				t.Errorf("%s %s (%s) as %s: %d %s, want 403", rt.Method, rt.Path, rt.Class, who, r.status, r.body)
			}
			if !allowed {
				envelope(t, r, 403, service.CodeDenied)
			}
		}
	}
	for _, c := range []Class{Public, Read, Write, Ingest, Outbound} {
		if !seen[c] {
			t.Errorf("no route of class %s", c)
		}
	}
}

// What a hostile dashboard or adapter would try with its own token.
func TestScopedTokensHostile(t *testing.T) {
	srv, l, _, ctx := newTokenServer(t)
	if _, err := l.AddFolder(ctx, store.Folder{Path: "acme"}); err != nil {
		t.Fatal(err)
	}
	read := "Bearer " + addToken(t, l, ctx, service.TokenIn{Name: "dash", Kind: service.KindRead})
	slack := "Bearer " + addToken(t, l, ctx, service.TokenIn{Name: "slack", Kind: service.KindAdapter, Platform: "slack"})
	for _, o := range []store.Outbound{{ChatJID: "slack:c1", Platform: "slack", Text: "for slack"}, {ChatJID: "tg:c2", Platform: "tg", Text: "for tg"}} {
		if _, err := l.Store().PutOutbound(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name, auth, method, path, body string
		status                         int
	}{
		{"read lists folders", read, "GET", "/v1/folders", "", 200},
		{"read adds a folder", read, "POST", "/v1/folders", `{"path":"evil"}`, 403},
		{"read grants itself", read, "POST", "/v1/grants", `{"principal":"user:token:dash","action":"*","scope":"**","effect":"allow"}`, 403},
		{"read mints a token", read, "POST", "/v1/tokens", `{"name":"x","kind":"admin"}`, 403},
		{"read posts a message", read, "POST", "/v1/messages", `{"chat_jid":"web:acme","text":"hi"}`, 403},
		{"adapter posts for its platform", slack, "POST", "/v1/messages", `{"chat_jid":"slack:c1","text":"hi"}`, 201},
		{"adapter posts as another platform", slack, "POST", "/v1/messages", `{"chat_jid":"slack:c1","platform":"tg","text":"hi"}`, 403},
		{"adapter posts into another platform's chat", slack, "POST", "/v1/messages", `{"chat_jid":"tg:c2","text":"hi"}`, 403},
		{"adapter addresses a folder directly", slack, "POST", "/v1/messages", `{"chat_jid":"web:acme","text":"hi"}`, 403},
		{"adapter reads chat history", slack, "GET", "/v1/messages?chat=tg:c2", "", 403},
		{"adapter reads another platform's queue", slack, "GET", "/v1/outbound?platform=tg", "", 403},
		{"adapter lists folders", slack, "GET", "/v1/folders", "", 403},
		{"adapter adds a route", slack, "POST", "/v1/routes", `{"match":"platform=slack","target":"acme"}`, 403},
		{"adapter dry-runs routing", slack, "POST", "/v1/resolve", `{"chat_jid":"slack:c1","text":"x"}`, 403},
	}
	for _, c := range cases {
		r := call(t, srv, c.method, c.path, c.auth, c.body)
		if r.status != c.status {
			t.Errorf("%s: %d %s, want %d", c.name, r.status, r.body, c.status)
		}
	}
	if fs, _ := l.Store().ListFolders(context.Background()); len(fs) != 1 {
		t.Errorf("folders after refused writes: %+v", fs)
	}
	if ms, _ := l.Store().ListMessages(context.Background(), "tg:c2", 0, 0); len(ms) != 1 {
		t.Errorf("tg:c2 got messages from the slack adapter: %+v", ms)
	}
	r := call(t, srv, "GET", "/v1/outbound", slack, "")
	var q []store.Outbound
	if json.Unmarshal([]byte(r.body), &q) != nil || len(q) != 1 || q[0].Text != "for slack" {
		t.Fatalf("slack's own queue: %d %s", r.status, r.body)
	}
	r = call(t, srv, "POST", "/v1/messages", slack, `{"chat_jid":"slack:c9","text":"x"}`)
	var ing service.Ingest
	if json.Unmarshal([]byte(r.body), &ing) != nil || ing.Message.Platform != "slack" {
		t.Fatalf("adapter message without platform: %s", r.body)
	}
}

func TestRevokedTokenIsUnauthorized(t *testing.T) {
	srv, l, _, ctx := newTokenServer(t)
	tok := "Bearer " + addToken(t, l, ctx, service.TokenIn{Name: "ops", Kind: service.KindAdmin})
	if r := call(t, srv, "GET", "/v1/folders", tok, ""); r.status != 200 {
		t.Fatalf("before revoke: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "DELETE", "/v1/tokens/ops", "Bearer "+adminToken, ""); r.status != 204 {
		t.Fatalf("revoke: %d %s", r.status, r.body)
	}
	envelope(t, call(t, srv, "GET", "/v1/folders", tok, ""), 401, CodeUnauthorized)
	// The revoked principal's rows and memberships went with it, so a new
	// token of the same name does not inherit them.
	if ms, _ := l.ListMembers(ctx); len(ms) != 1 {
		t.Fatalf("memberships after revoke: %+v", ms)
	}
	for _, bad := range []string{"Bearer", "Bearer ", "Basic " + adminToken, "Bearer " + strings.TrimPrefix(tok, "Bearer ")[:20]} {
		envelope(t, call(t, srv, "GET", "/v1/folders", bad, ""), 401, CodeUnauthorized)
	}
}

// The database, WAL included, holds only the SHA-256 of a token.
func TestTokensNeverStoredInClear(t *testing.T) {
	srv, l, _, _ := newTokenServer(t)
	r := call(t, srv, "POST", "/v1/tokens", "Bearer "+adminToken, `{"name":"dash","kind":"read"}`)
	var nt service.NewToken
	if r.status != 201 || json.Unmarshal([]byte(r.body), &nt) != nil || nt.Secret == "" {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := call(t, srv, "GET", "/v1/tokens", "Bearer "+adminToken, ""); strings.Contains(r.body, nt.Secret) || !strings.Contains(r.body, `"dash"`) {
		t.Fatalf("token list: %s", r.body)
	}
	sum := sha256.Sum256([]byte(nt.Secret))
	var all []byte
	files, _ := filepath.Glob(filepath.Join(l.DataDir(), service.DBFile+"*"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
	}
	secret := strings.TrimPrefix(nt.Secret, service.TokenPrefix)
	if bytes.Contains(all, []byte(secret)) || bytes.Contains(all, []byte(secret[:16])) {
		t.Fatalf("the token is in the database files %v", files)
	}
	if !bytes.Contains(all, sum[:]) {
		t.Fatalf("the token's SHA-256 is not in the database files %v", files)
	}
}

func TestTokenInputErrors(t *testing.T) {
	srv, _, _, _ := newTokenServer(t)
	for _, body := range []string{
		`{"name":"x","kind":"root"}`,
		`{"name":"X Y","kind":"read"}`,
		`{"name":"x","kind":"adapter"}`,
		`{"name":"x","kind":"adapter","platform":"a:b"}`,
		`{"name":"x","kind":"read","platform":"slack"}`,
	} {
		envelope(t, call(t, srv, "POST", "/v1/tokens", "Bearer "+adminToken, body), 400, service.CodeInvalid)
	}
	call(t, srv, "POST", "/v1/tokens", "Bearer "+adminToken, `{"name":"x","kind":"read"}`)
	envelope(t, call(t, srv, "POST", "/v1/tokens", "Bearer "+adminToken, `{"name":"x","kind":"read"}`), 409, service.CodeConflict)
	envelope(t, call(t, srv, "DELETE", "/v1/tokens/nosuch", "Bearer "+adminToken, ""), 404, service.CodeNotFound)
}
