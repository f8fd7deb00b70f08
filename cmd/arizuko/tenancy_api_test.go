package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// A caller's expected answer to one request.
const (
	ok   = "ok"   // 2xx
	deny = "deny" // 403
	mine = "mine" // 2xx, and not a byte of the other tenant's rows
	any_ = "any"  // public: the same for every caller, never 5xx
)

// callers in the order each row runs them: refusals first, so a success
// of the operator never decides another caller's answer.
var callers = []string{"read", "globex", "acme", "op"}

// tags stand for a caller in the names it makes, which must not spell a
// tenant: a list of acme's rows holds "acme/del-gx", never "globex".
var tags = map[string]string{"read": "rd", "globex": "gx", "acme": "ac", "op": "op"}

// tenancyRow is one operation of openapi.yaml with a request on acme's side
// and what each caller gets. {who} in url and body is the caller's name, so
// each caller changes rows of its own; {route}, {grant} and {turn} are ids
// the setup made for that caller.
type tenancyRow struct {
	op, url, body          string
	read, globex, acme, ad string
}

var tenancyTable = []tenancyRow{
	{"GET /health", "/health", "", any_, any_, any_, any_},
	{"GET /openapi.yaml", "/openapi.yaml", "", any_, any_, any_, any_},
	{"GET /", "/", "", any_, any_, any_, any_},
	{"GET /webchat/{file}", "/webchat/app.js", "", any_, any_, any_, any_},
	{"POST /webchat/hook/{secret}/{op}", "/webchat/hook/guess/send", `{}`, any_, any_, any_, any_},
	{"POST /v1/messages", "/v1/messages", `{"chat_jid":"web:acme","text":"from {who}"}`, deny, deny, ok, ok},
	{"GET /v1/messages", "/v1/messages?chat=web:acme", "", ok, mine, mine, ok},
	{"POST /v1/resolve", "/v1/resolve", `{"chat_jid":"slack:A1","platform":"slack","text":"x"}`, ok, deny, deny, ok},
	{"GET /v1/outbound", "/v1/outbound?platform=slack", "", ok, deny, deny, ok},
	{"GET /v1/folders", "/v1/folders", "", ok, mine, mine, ok},
	{"POST /v1/folders", "/v1/folders", `{"path":"acme/new-{who}"}`, deny, deny, ok, ok},
	{"DELETE /v1/folders/{path}", "/v1/folders/acme/del-{who}", "", deny, deny, ok, ok},
	{"PATCH /v1/folders/{path}", "/v1/folders/acme/sub", `{"stdout_reply":true}`, deny, deny, ok, ok},
	{"GET /v1/routes", "/v1/routes", "", ok, mine, mine, ok},
	{"POST /v1/routes", "/v1/routes", `{"seq":100,"match":"chat_jid=irc:new-{who}","target":"acme"}`, deny, deny, ok, ok},
	{"DELETE /v1/routes/{id}", "/v1/routes/{route}", "", deny, deny, ok, ok},
	{"GET /v1/grants", "/v1/grants", "", ok, mine, mine, ok},
	{"POST /v1/grants", "/v1/grants", `{"principal":"user:new-{who}","action":"mcp:send","scope":"acme/sub","effect":"allow"}`, deny, deny, ok, ok},
	{"DELETE /v1/grants/{id}", "/v1/grants/{grant}", "", deny, deny, ok, ok},
	{"GET /v1/members", "/v1/members", "", ok, mine, mine, ok},
	{"POST /v1/members", "/v1/members", `{"member":"folder:acme/sub","role":"role:new-{who}"}`, deny, deny, deny, ok},
	{"DELETE /v1/members", "/v1/members?member=folder:acme/sub&role=role:del-{who}", "", deny, deny, deny, ok},
	{"GET /v1/audit", "/v1/audit?limit=1000", "", ok, mine, mine, ok},
	{"GET /v1/metrics", "/v1/metrics", "", ok, deny, deny, ok},
	{"GET /v1/network", "/v1/network?folder=acme", "", ok, deny, ok, ok},
	{"POST /v1/network", "/v1/network", `{"folder":"acme","host":"new-{who}.example.com","effect":"allow"}`, deny, deny, ok, ok},
	{"DELETE /v1/network", "/v1/network?folder=acme&host=del-{who}.example.com", "", deny, deny, ok, ok},
	{"GET /v1/observations", "/v1/observations", "", ok, mine, mine, ok},
	{"DELETE /v1/observations", "/v1/observations?observer=acme/obs-{who}&source=acme/sub", "", deny, deny, ok, ok},
	{"GET /v1/secrets", "/v1/secrets", "", ok, mine, mine, ok},
	{"POST /v1/secrets", "/v1/secrets", `{"scope":"folder:acme","name":"NEW_{who}","value":"12345678"}`, deny, deny, ok, ok},
	{"DELETE /v1/secrets", "/v1/secrets?scope=folder:acme&name=DEL_{who}", "", deny, deny, ok, ok},
	{"POST /v1/secrets/rotate", "/v1/secrets/rotate", "", deny, deny, deny, ok},
	{"GET /v1/tokens", "/v1/tokens", "", ok, deny, deny, ok},
	{"POST /v1/tokens", "/v1/tokens", `{"name":"new-{who}","kind":"admin"}`, deny, deny, deny, ok},
	{"DELETE /v1/tokens/{name}", "/v1/tokens/victim-{who}", "", deny, deny, deny, ok},
	{"POST /v1/adapters", "/v1/adapters", `{"platform":"new-{who}","callback_url":"http://127.0.0.1:9/"}`, deny, deny, deny, ok},
	{"DELETE /v1/adapters/{platform}", "/v1/adapters/del-{who}", "", deny, deny, deny, ok},
	{"GET /v1/turns", "/v1/turns", "", ok, mine, mine, ok},
	{"GET /v1/turns/{id}", "/v1/turns/{turn}", "", ok, deny, ok, ok},
	{"GET /v1/budgets/{folder}", "/v1/budgets/acme", "", ok, deny, ok, ok},
	{"PUT /v1/budgets/{folder}", "/v1/budgets/acme", `{"max_turns_per_day":5}`, deny, deny, deny, ok},
	{"GET /v1/webchat/folders", "/v1/webchat/folders", "", ok, mine, mine, ok},
	{"POST /v1/webchat/messages", "/v1/webchat/messages", `{"folder":"acme","text":"web from {who}"}`, deny, deny, ok, ok},
	{"GET /v1/webchat/events", "/v1/webchat/events?folder=acme", "", ok, deny, ok, ok},
	{"GET /v1/hooks", "/v1/hooks", "", ok, mine, mine, ok},
	{"POST /v1/hooks", "/v1/hooks", `{"folder":"acme","signed":true}`, deny, deny, ok, ok},
	{"DELETE /v1/hooks/{id}", "/v1/hooks/{hook}", "", deny, deny, ok, ok},
	{"POST /hook/{token}", "/hook/{hooktoken}", `{"from":"{who}"}`, any_, any_, any_, any_},
	{"GET /v1/schedules", "/v1/schedules", "", ok, mine, mine, ok},
	{"POST /v1/schedules", "/v1/schedules", `{"folder":"acme","cron":"@daily","prompt":"from {who}"}`, deny, deny, ok, ok},
	{"DELETE /v1/schedules/{id}", "/v1/schedules/{schedule}", "", deny, deny, ok, ok},
	{"GET /v1/fleet/whoami", "/v1/fleet/whoami", "", deny, deny, deny, any_},
	{"POST /v1/fleet/claim", "/v1/fleet/claim", `{}`, deny, deny, deny, any_},
	{"POST /v1/fleet/outcome", "/v1/fleet/outcome", `{}`, deny, deny, deny, any_},
	{"POST /v1/fleet/renew", "/v1/fleet/renew", `{}`, deny, deny, deny, any_},
	{"POST /v1/fleet/mcp", "/v1/fleet/mcp", "", deny, deny, deny, any_},
	{"POST /v1/fleet/home/latest", "/v1/fleet/home/latest", `{}`, deny, deny, deny, any_},
	{"POST /v1/fleet/home/chunks", "/v1/fleet/home/chunks", `{}`, deny, deny, deny, any_},
	{"POST /v1/fleet/home/upload", "/v1/fleet/home/upload", "", deny, deny, deny, any_},
	{"POST /v1/fleet/home/manifest", "/v1/fleet/home/manifest", "", deny, deny, deny, any_},
	// An empty body is an empty tar: each push of acme's home is a version.
	{"PUT /v1/home/files", "/v1/home/files?folder=acme", "", deny, deny, ok, ok},
	{"GET /v1/home/files", "/v1/home/files?folder=acme", "", deny, deny, ok, ok},
	{"GET /v1/home/log", "/v1/home/log?folder=acme", "", deny, deny, mine, ok},
	{"GET /v1/home/diff", "/v1/home/diff?folder=acme&a=0&b=1", "", deny, deny, ok, ok},
	{"POST /v1/home/restore", "/v1/home/restore", `{"folder":"acme","version":1}`, deny, deny, ok, ok},
}

// Every operation of openapi.yaml, run by the operator, tenant acme's token,
// tenant globex's token and a read token, against acme's side: each caller
// gets exactly its row's answer, and a tenant's list holds no row of the
// other tenant. A route without a row fails the test.
func TestTenantTokensOverEveryRoute(t *testing.T) {
	s, l := daemonServerWith(t, fleetTurns(t), servicetest.Options{Keyed: true})
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	ctx := context.Background()
	admin := service.WithPrincipal(ctx, service.AdminPrincipal)
	st := l.Store()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"acme", "acme/sub", "globex", "globex/sub"} {
		_, err := l.AddFolder(admin, store.Folder{Path: f})
		must(err)
	}
	tokens := map[string]string{"op": openapiAdmin}
	for who, in := range map[string]service.TokenIn{
		"acme":   {Name: "acme-ops", Kind: service.KindTenant, Tenant: "acme"},
		"globex": {Name: "globex-ops", Kind: service.KindTenant, Tenant: "globex"},
		"read":   {Name: "dash", Kind: service.KindRead},
	} {
		nt, err := l.AddToken(admin, in)
		must(err)
		tokens[who] = nt.Secret
	}
	acmeCtx := service.WithPrincipal(ctx, service.TokenPrincipal("acme-ops"))
	for _, r := range []router.Route{
		{Seq: 10, Match: "platform=slack chat_jid=slack:A1", Target: "acme"},
		{Seq: 10, Match: "platform=slack chat_jid=slack:G1", Target: "globex"},
	} {
		_, err := l.AddRoute(admin, r)
		must(err)
	}
	for _, c := range []string{"web:acme", "web:globex", "slack:G1"} {
		_, err := l.PostMessage(admin, service.MessageIn{ChatJID: c, Platform: "slack", Sender: "u", Text: "hello " + c})
		must(err)
	}
	must(l.SetSecret(admin, service.SecretIn{Scope: "folder:globex", Name: "GLOBEX_KEY", Value: "globex-secret-value"}))
	must(st.AddObserver(ctx, "globex/sub", "globex"))
	_, err := l.AddGrant(admin, acl.Grant{Principal: "folder:globex/sub", Action: "mcp:send", Scope: "globex/sub", Effect: acl.Allow})
	must(err)
	ids := map[string]map[string]string{}
	for _, who := range callers {
		ids[who] = map[string]string{}
		tag := tags[who]
		_, err := l.AddFolder(admin, store.Folder{Path: "acme/del-" + tag})
		must(err)
		_, err = l.AddFolder(admin, store.Folder{Path: "acme/obs-" + tag})
		must(err)
		must(st.AddObserver(ctx, "acme/obs-"+tag, "acme/sub"))
		// The operator deletes an operator's route; everyone else tries acme's own.
		var r router.Route
		if who == "op" {
			r, err = l.AddRoute(admin, router.Route{Seq: 10, Match: "chat_jid=slack:del-op", Target: "acme"})
		} else {
			r, err = l.AddRoute(acmeCtx, router.Route{Seq: 100, Match: "chat_jid=irc:del-" + tag, Target: "acme"})
		}
		must(err)
		ids[who]["{route}"] = fmt.Sprint(r.ID)
		g, err := l.AddGrant(acmeCtx, acl.Grant{Principal: "user:del-" + tag, Action: "mcp:send", Scope: "acme/sub", Effect: acl.Allow})
		must(err)
		ids[who]["{grant}"] = fmt.Sprint(g.ID)
		must(l.AddMember(admin, acl.Edge{Member: "folder:acme/sub", Role: "role:del-" + tag}))
		_, err = l.SetNetworkRule(admin, store.NetworkRule{Folder: "acme", Host: "del-" + tag + ".example.com", Effect: "allow"})
		must(err)
		must(l.SetSecret(admin, service.SecretIn{Scope: "folder:acme", Name: "DEL_" + tag, Value: "12345678"}))
		_, err = l.AddToken(admin, service.TokenIn{Name: "victim-" + tag, Kind: service.KindRead})
		must(err)
		_, err = l.SetAdapter(admin, store.Adapter{Platform: "del-" + tag, CallbackURL: "http://127.0.0.1:9/"})
		must(err)
		h, err := l.AddHook(admin, service.HookIn{Folder: "acme"})
		must(err)
		ids[who]["{hook}"], ids[who]["{hooktoken}"] = fmt.Sprint(h.ID), strings.TrimPrefix(h.Path, "/hook/")
		sc, err := l.AddSchedule(admin, service.ScheduleIn{Folder: "acme", Cron: "@daily", Prompt: "del " + tag})
		must(err)
		ids[who]["{schedule}"] = fmt.Sprint(sc.ID)
	}
	_, err = l.AddHook(admin, service.HookIn{Folder: "globex"})
	must(err)
	_, err = l.AddSchedule(admin, service.ScheduleIn{Folder: "globex", Cron: "@daily", Prompt: "globex's own"})
	must(err)
	m, _, err := st.PutMessage(ctx, store.Message{ChatJID: "web:acme", Platform: "web", Text: "turn", Folder: "acme"})
	must(err)
	tr, err := st.CreateTurn(ctx, "acme", "", m.ID, m.ID)
	must(err)
	gm, _, err := st.PutMessage(ctx, store.Message{ChatJID: "web:globex", Platform: "web", Text: "turn", Folder: "globex"})
	must(err)
	_, err = st.CreateTurn(ctx, "globex", "", gm.ID, gm.ID)
	must(err)
	for _, who := range callers {
		ids[who]["{turn}"] = fmt.Sprint(tr.ID)
	}

	covered := map[string]bool{}
	for _, row := range tenancyTable {
		covered[row.op] = true
		method, _, _ := strings.Cut(row.op, " ")
		for i, who := range callers {
			want := []string{row.read, row.globex, row.acme, row.ad}[i]
			url, body := row.url, row.body
			for k, v := range ids[who] {
				url = strings.ReplaceAll(url, k, v)
			}
			url, body = strings.ReplaceAll(url, "{who}", tags[who]), strings.ReplaceAll(body, "{who}", tags[who])
			status, got := tenancyCall(t, srv.URL, method, url, tokens[who], body)
			other := map[string]string{"acme": "globex", "globex": "acme"}[who]
			switch {
			case want == any_ && status >= 500:
				t.Errorf("%s as %s: %d %s", row.op, who, status, got)
			case want == deny && status != http.StatusForbidden:
				t.Errorf("%s as %s: %d %s, want 403", row.op, who, status, got)
			case (want == ok || want == mine) && (status < 200 || status > 299):
				t.Errorf("%s as %s: %d %s, want 2xx", row.op, who, status, got)
			// The other tenant's token may show as the principal of an audit
			// row on this tenant's folders: its refused attempt here.
			case want == mine && strings.Contains(strings.ReplaceAll(got, service.TokenPrincipal(other+"-ops"), ""), other):
				t.Errorf("%s as %s shows %s's rows: %s", row.op, who, other, got)
			}
		}
	}
	doc := loadOpenAPI(t)
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			if !covered[method+" "+path] {
				t.Errorf("%s %s has no row in tenancyTable: say what each caller may do", method, path)
			}
		}
	}
	// A tenant token is refused beyond its tree, and every refusal is audited.
	audit, _ := st.ListAudit(ctx, 2000)
	denied := 0
	for _, a := range audit {
		if a.Principal == service.TokenPrincipal("globex-ops") && a.Decision == "deny" {
			denied++
		}
	}
	if denied < 10 {
		t.Errorf("globex's token: %d denials audited", denied)
	}
}

// tenancyCall makes one request and returns its status and (some of) its body;
// an event stream is read for a moment only.
func tenancyCall(t *testing.T, base, method, url, token, body string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+url, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		buf := make([]byte, 4096)
		n, _ := resp.Body.Read(buf)
		return resp.StatusCode, string(buf[:n])
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}
