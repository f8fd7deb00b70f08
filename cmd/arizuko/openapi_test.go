package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("pkg/arizuko/api/openapi.yaml is not valid OpenAPI 3: %v", err)
	}
	return doc
}

// specPath is a mux pattern as an OpenAPI path: {x...} is {x}, "/{$}" is "/".
func specPath(p string) string {
	if p == "/{$}" {
		return "/"
	}
	return strings.ReplaceAll(p, "...}", "}")
}

// daemonServer is the daemon's full handler (core API, pipeline, web chat,
// and the fleet routes when tc has a NATS URL).
func daemonServer(t *testing.T, tc TurnsConfig) (*api.Server, *service.Local) {
	t.Helper()
	return daemonServerWith(t, tc, servicetest.Options{})
}

// daemonServerWith is daemonServer over a data dir made with o.
func daemonServerWith(t *testing.T, tc TurnsConfig, o servicetest.Options) (*api.Server, *service.Local) {
	t.Helper()
	ctx := context.Background()
	l := servicetest.New(t, o).L
	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return hostProcess{} }
	t.Cleanup(func() { newTurnRunner = prev })
	h, stop, err := startTurns(ctx, tc, l, openapiAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return h.(*api.Server), l
}

const openapiAdmin = "0123456789abcdef0123"

// fleetTurns is a pipeline whose turns go to a real one-node JetStream
// cluster, so the daemon serves the fleet routes too.
func fleetTurns(t *testing.T) TurnsConfig {
	return TurnsConfig{fleet: FleetConfig{NATS: natstest.Start(t, 1).URL(), Replicas: 1, insecure: true}}
}

// Every route the daemon registers, the fleet's included, is in the document
// with its class, and every operation of the document is a route it registers.
func TestOpenAPIMatchesRoutes(t *testing.T) {
	doc := loadOpenAPI(t)
	s, _ := daemonServer(t, fleetTurns(t))
	fleet := 0
	for _, r := range s.Routes() {
		if r.Class == api.Fleet {
			fleet++
		}
	}
	if fleet < 4 {
		t.Fatalf("the daemon with --nats serves %d fleet routes, want the runner's four", fleet)
	}
	served := map[string]api.Class{}
	for _, r := range s.Routes() {
		served[r.Method+" "+specPath(r.Path)] = r.Class
	}
	documented := map[string]api.Class{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			class, _ := op.Extensions["x-class"].(string)
			documented[method+" "+path] = api.Class(class)
		}
	}
	var missing, extra, wrong []string
	for k, c := range served {
		d, ok := documented[k]
		switch {
		case !ok:
			missing = append(missing, k)
		case d != c:
			wrong = append(wrong, k+": served "+string(c)+", documented "+string(d))
		}
	}
	for k := range documented {
		if _, ok := served[k]; !ok {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing)+len(extra)+len(wrong) > 0 {
		t.Fatalf("openapi.yaml and the daemon disagree:\nserved, not documented: %v\ndocumented, not served: %v\nclass: %v", missing, extra, wrong)
	}
}

// Real answers of the daemon, successes and errors, validate against the
// document's schemas (which refuse undocumented fields).
func TestOpenAPISampleResponses(t *testing.T) {
	srv, router, l := specServer(t, TurnsConfig{})
	ctx := service.WithPrincipal(context.Background(), service.AdminPrincipal)
	read, err := l.AddToken(ctx, service.TokenIn{Name: "dash", Kind: service.KindRead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Store().PutOutbound(context.Background(), store.Outbound{ChatJID: "slack:c1", Platform: "slack", Text: "hi", Folder: "acme"}); err != nil {
		t.Fatal(err)
	}
	admin := openapiAdmin
	steps := []struct {
		method, path, token, body string
		status                    int
	}{
		{"GET", "/health", "", "", 200},
		{"GET", "/openapi.yaml", "", "", 200},
		{"GET", "/", "", "", 200},
		{"GET", "/webchat/app.js", "", "", 200},
		{"POST", "/v1/folders", admin, `{"path":"acme","display_name":"Acme","agent_command":["python3","/home/node/agent.py"]}`, 201},
		{"POST", "/v1/folders", admin, `{"path":"acme"}`, 409},
		{"GET", "/v1/folders", read.Secret, "", 200},
		{"POST", "/v1/routes", admin, `{"match":"platform=slack","target":"acme"}`, 201},
		{"GET", "/v1/routes", admin, "", 200},
		{"POST", "/v1/resolve", admin, `{"chat_jid":"slack:c1","platform":"slack","text":"x"}`, 200},
		{"POST", "/v1/messages", admin, `{"chat_jid":"slack:c1","platform":"slack","text":"hello","platform_id":"p1"}`, 201},
		{"POST", "/v1/messages", admin, `{"chat_jid":"slack:c1","platform":"slack","text":"hello","platform_id":"p1"}`, 200},
		{"POST", "/v1/messages", admin, `{"chat_jid":""}`, 400},
		{"GET", "/v1/messages?chat=slack:c1", admin, "", 200},
		{"GET", "/v1/outbound?platform=slack", read.Secret, "", 200},
		{"POST", "/v1/grants", admin, `{"principal":"user:dev","action":"folder:read","scope":"**","effect":"allow"}`, 201},
		{"GET", "/v1/grants", admin, "", 200},
		{"DELETE", "/v1/grants/999", admin, "", 404},
		{"POST", "/v1/members", admin, `{"member":"user:dev","role":"role:eng"}`, 201},
		{"GET", "/v1/members", admin, "", 200},
		{"DELETE", "/v1/members?member=user:dev&role=role:eng", admin, "", 204},
		{"POST", "/v1/network", admin, `{"folder":"acme","host":"example.com","effect":"allow"}`, 200},
		{"GET", "/v1/network?folder=acme", admin, "", 200},
		{"DELETE", "/v1/network?folder=acme&host=example.com", admin, "", 204},
		{"GET", "/v1/secrets", admin, "", 200},
		{"POST", "/v1/tokens", admin, `{"name":"slack","kind":"adapter","platform":"slack"}`, 201},
		{"GET", "/v1/tokens", admin, "", 200},
		{"DELETE", "/v1/tokens/slack", admin, "", 204},
		{"POST", "/v1/adapters", admin, `{"platform":"slack","callback_url":"http://127.0.0.1:9"}`, 200},
		{"DELETE", "/v1/adapters/slack", admin, "", 204},
		{"GET", "/v1/turns", admin, "", 200},
		{"GET", "/v1/turns/999", admin, "", 404},
		{"GET", "/v1/budgets/acme", admin, "", 200},
		{"PUT", "/v1/budgets/acme", admin, `{"max_turns_per_day":5}`, 200},
		{"GET", "/v1/webchat/folders", admin, "", 200},
		{"POST", "/v1/webchat/messages", read.Secret, `{"folder":"acme","text":"x"}`, 403},
		{"GET", "/v1/audit", admin, "", 200},
		{"GET", "/v1/folders", "azk_wrong", "", 401},
		{"PUT", "/v1/folders", admin, "{}", 405},
		{"DELETE", "/v1/routes/1", admin, "", 204},
		{"POST", "/v1/hooks", admin, `{"folder":"acme","per_minute":5}`, 201},
		{"GET", "/v1/hooks", read.Secret, "", 200},
		{"POST", "/hook/azh_guess", "", `{}`, 404},
		{"DELETE", "/v1/hooks/1", admin, "", 204},
		{"DELETE", "/v1/hooks/1", admin, "", 404},
		{"POST", "/v1/schedules", admin, `{"folder":"acme","cron":"@daily","tz":"Asia/Tokyo","prompt":"p"}`, 201},
		{"POST", "/v1/schedules", admin, `{"folder":"acme","cron":"61 * * * *","prompt":"p"}`, 400},
		{"GET", "/v1/schedules", read.Secret, "", 200},
		{"DELETE", "/v1/schedules/1", admin, "", 204},
		{"DELETE", "/v1/folders/acme", admin, "", 204},
	}
	text := func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
		b, err := io.ReadAll(body)
		return string(b), err
	}
	for _, ct := range []string{"text/html", "text/javascript", "text/css"} {
		openapi3filter.RegisterBodyDecoder(ct, text)
	}
	for _, st := range steps {
		checkStep(t, router, srv.URL, st.method, st.path, st.token, st.body, nil, st.status)
	}

	// The routed message made a turn; its detail validates too.
	var ts []store.Turn
	eventually.True(t, time.Minute, "the routed message makes a turn", func() bool {
		ts, _ = l.Store().ListTurns(context.Background(), "acme", 1)
		return len(ts) == 1
	})
	req, _ := http.NewRequest("GET", srv.URL+"/v1/turns/"+strconv.FormatInt(ts[0].ID, 10), nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	validate(t, router, "GET /v1/turns/{id}", req, resp, body)
}

// specServer serves the daemon of tc over HTTP until the test ends, with a
// router of the document pointed at it.
func specServer(t *testing.T, tc TurnsConfig) (*httptest.Server, routers.Router, *service.Local) {
	t.Helper()
	doc := loadOpenAPI(t)
	s, l := daemonServer(t, tc)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	doc.Servers = openapi3.Servers{{URL: srv.URL}}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return srv, router, l
}

// checkStep sends one request (the token, when set, as the bearer; header
// added) and wants status and an answer that validates against the document.
func checkStep(t *testing.T, router routers.Router, url, method, path, token, body string, header map[string]string, status int) {
	t.Helper()
	req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	name := method + " " + path
	if resp.StatusCode != status {
		t.Errorf("%s: %d %s, want %d", name, resp.StatusCode, got, status)
		return
	}
	validate(t, router, name, req, resp, got)
}

func validate(t *testing.T, router routers.Router, name string, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	if resp.StatusCode == http.StatusMethodNotAllowed {
		var e service.Error
		if json.Unmarshal(body, &e) != nil || e.Code != "method_not_allowed" {
			t.Errorf("%s: 405 without the envelope: %s", name, body)
		}
		return // no operation to validate against, by definition
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Errorf("%s: not in openapi.yaml: %v", name, err)
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(body)),
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("%s: answer %d does not match openapi.yaml: %v\n%s", name, resp.StatusCode, err, body)
	}
}
