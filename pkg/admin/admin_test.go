package admin

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy"
)

const secret = "s3cret-token"

type testServer struct {
	url  string
	reg  *proxy.Registry
	srv  *Server
	logs *nettest.Buffer
}

// start runs a real admin server on a loopback port until the test ends.
func start(t *testing.T, opts Options) *testServer {
	t.Helper()
	if opts.Registry == nil {
		opts.Registry = proxy.NewRegistry()
	}
	logs := &nettest.Buffer{}
	opts.Log = slog.New(slog.NewTextHandler(logs, nil))
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	return &testServer{url: "http://" + ln.Addr().String(), reg: opts.Registry, srv: srv, logs: logs}
}

// do sends a request and decodes the JSON response into out (if non-nil).
func (ts *testServer) do(t *testing.T, method, path, token, body string, out any) int {
	t.Helper()
	req, err := http.NewRequest(method, ts.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: response %q is not JSON: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

func TestAuth(t *testing.T) {
	ts := start(t, Options{Secret: secret})
	tests := []struct {
		name, method, path, token string
		want                      int
	}{
		{"health needs no token", "GET", "/health", "", 200},
		{"state without token", "GET", "/v1/state", "", 401},
		{"state wrong token", "GET", "/v1/state", "nope", 401},
		{"state prefix of token", "GET", "/v1/state", secret[:5], 401},
		{"state right token", "GET", "/v1/state", secret, 200},
		{"metrics without token", "GET", "/metrics", "", 401},
		{"metrics right token", "GET", "/metrics", secret, 200},
		{"register without token", "POST", "/v1/register", "", 401},
		{"patch without token", "PATCH", "/v1/clients/10.0.0.2", "", 401},
		{"unknown path without token", "GET", "/v1/nope", "", 401},
		{"unknown path with token", "GET", "/v1/nope", secret, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ts.do(t, tt.method, tt.path, tt.token, `{"ip":"10.0.0.9"}`, nil); got != tt.want {
				t.Errorf("status %d, want %d", got, tt.want)
			}
		})
	}
	var e ErrorJSON
	ts.do(t, "GET", "/v1/state", "bad", "", &e)
	if e.Error != "unauthorized" || e.Message == "" {
		t.Errorf("401 body = %+v", e)
	}
	if n := len(ts.reg.List()); n != 0 {
		t.Errorf("unauthenticated register changed the registry: %d clients", n)
	}
}

func TestHealth(t *testing.T) {
	var mu sync.Mutex
	var down error
	ts := start(t, Options{Healthy: func() error { mu.Lock(); defer mu.Unlock(); return down }})
	var h map[string]string
	if code := ts.do(t, "GET", "/health", "", "", &h); code != 200 || h["status"] != "ok" {
		t.Fatalf("up: %d %v", code, h)
	}
	if b := buildinfo.Get(); h["version"] != b.Version || h["revision"] != b.Revision || h["build"] != b.String() {
		t.Errorf("health %v does not carry the build %+v", h, b)
	}
	mu.Lock()
	down = errors.New("forward listener closed")
	mu.Unlock()
	if code := ts.do(t, "GET", "/health", "", "", &h); code != 503 || h["status"] != "proxy_down" {
		t.Fatalf("down: %d %v", code, h)
	}
}

func TestRoundTrip(t *testing.T) {
	ts := start(t, Options{Secret: secret, Active: func() int { return 3 }})
	var c ClientJSON
	if code := ts.do(t, "POST", "/v1/register", secret,
		`{"ip":"10.0.0.2","id":"job-1","allowlist":["github.com","*.pypi.org"]}`, &c); code != 201 {
		t.Fatalf("register: %d %+v", code, c)
	}
	if c.IP != "10.0.0.2" || c.ID != "job-1" || strings.Join(c.Allowlist, ",") != "*.pypi.org,github.com" {
		t.Errorf("register response %+v", c)
	}
	var e ErrorJSON
	if code := ts.do(t, "POST", "/v1/register", secret, `{"ip":"10.0.0.2","id":"job-2"}`, &e); code != 409 {
		t.Errorf("duplicate register: %d %+v", code, e)
	}
	if code := ts.do(t, "PATCH", "/v1/clients/10.0.0.2", secret,
		`{"add":["example.org:8443"],"remove":["github.com"]}`, &c); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	if strings.Join(c.Allowlist, ",") != "*.pypi.org,example.org:8443" {
		t.Errorf("patched allowlist %v", c.Allowlist)
	}
	if got, _ := ts.reg.Lookup(netip.MustParseAddr("10.0.0.2")); got.Allow.Check("example.org", 8443) != nil {
		t.Errorf("registry does not reflect the patch: %v", got.Allow.Entries())
	}
	var st StateJSON
	if code := ts.do(t, "GET", "/v1/state", secret, "", &st); code != 200 || len(st.Clients) != 1 ||
		st.Clients[0].ID != "job-1" || st.ActiveTunnels != 3 {
		t.Errorf("state: %d %+v", code, st)
	}
	if code := ts.do(t, "PATCH", "/v1/clients/10.0.0.3", secret, `{"add":["a.example"]}`, &e); code != 404 || e.Error != "unknown_client" {
		t.Errorf("patch unknown: %d %+v", code, e)
	}
	if code := ts.do(t, "POST", "/v1/unregister", secret, `{"ip":"10.0.0.2"}`, nil); code != 200 {
		t.Errorf("unregister: %d", code)
	}
	if code := ts.do(t, "POST", "/v1/unregister", secret, `{"ip":"10.0.0.2"}`, &e); code != 404 {
		t.Errorf("second unregister: %d", code)
	}
	if code := ts.do(t, "GET", "/v1/state", secret, "", &st); code != 200 || len(st.Clients) != 0 {
		t.Errorf("state after unregister: %+v", st)
	}
}

func TestBadRequests(t *testing.T) {
	ts := start(t, Options{})
	ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.5","id":"x","allowlist":["a.example"]}`, nil)
	tests := []struct {
		name, method, path, body, code string
	}{
		{"malformed json", "POST", "/v1/register", `{"ip":`, "invalid_json"},
		{"not an object", "POST", "/v1/register", `["10.0.0.2"]`, "invalid_json"},
		{"trailing data", "POST", "/v1/register", `{"ip":"10.0.0.2"} {}`, "invalid_json"},
		{"unknown field", "POST", "/v1/register", `{"ip":"10.0.0.2","allow":["a.example"]}`, "invalid_json"},
		{"bad ip", "POST", "/v1/register", `{"ip":"10.0.0","id":"x"}`, "invalid_ip"},
		{"missing ip", "POST", "/v1/register", `{"id":"x"}`, "invalid_ip"},
		{"bad allowlist url", "POST", "/v1/register", `{"ip":"10.0.0.2","allowlist":["https://a.example/"]}`, "invalid_allowlist"},
		{"bad allowlist range", "POST", "/v1/register", `{"ip":"10.0.0.2","allowlist":["1.2.3.4/24"]}`, "invalid_allowlist"},
		{"unregister unknown field", "POST", "/v1/unregister", `{"ip":"10.0.0.5","force":true}`, "invalid_json"},
		{"unregister bad ip", "POST", "/v1/unregister", `{"ip":"x"}`, "invalid_ip"},
		{"patch bad path ip", "PATCH", "/v1/clients/not-an-ip", `{"add":[]}`, "invalid_ip"},
		{"patch unknown field", "PATCH", "/v1/clients/10.0.0.5", `{"added":["b.example"]}`, "invalid_json"},
		{"patch bad entry", "PATCH", "/v1/clients/10.0.0.5", `{"add":["*"," "]}`, "invalid_allowlist"},
		{"patch bad wildcard", "PATCH", "/v1/clients/10.0.0.5", `{"add":["*.com"]}`, "invalid_allowlist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var e ErrorJSON
			if code := ts.do(t, tt.method, tt.path, "", tt.body, &e); code != 400 || e.Error != tt.code || e.Message == "" {
				t.Errorf("got %d %+v, want 400 %s", code, e, tt.code)
			}
		})
	}
	// Nothing above may have changed the registry.
	cs := ts.reg.List()
	if len(cs) != 1 || strings.Join(cs[0].Allow.Entries(), ",") != "a.example" {
		t.Errorf("registry changed by bad requests: %+v", cs)
	}
}

func TestStatePersistsAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	ts := start(t, Options{StateFile: path})
	ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.2","id":"a","allowlist":["a.example"]}`, nil)
	ts.do(t, "POST", "/v1/register", "", `{"ip":"fd00::2","id":"b","allowlist":["b.example:8080"]}`, nil)
	ts.do(t, "PATCH", "/v1/clients/10.0.0.2", "", `{"add":["c.example"]}`, nil)
	ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.3","id":"gone"}`, nil)
	ts.do(t, "POST", "/v1/unregister", "", `{"ip":"10.0.0.3"}`, nil)

	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("state file mode %v, want 0600", fi.Mode().Perm())
	}
	if leftovers, _ := filepath.Glob(filepath.Join(filepath.Dir(path), ".*tmp*")); len(leftovers) != 0 {
		t.Errorf("temp files left behind: %v", leftovers)
	}

	// A second server on a fresh registry is the restarted daemon.
	ts2 := start(t, Options{StateFile: path})
	var st StateJSON
	ts2.do(t, "GET", "/v1/state", "", "", &st)
	want := []ClientJSON{
		{IP: "10.0.0.2", ID: "a", Allowlist: []string{"a.example", "c.example"}},
		{IP: "fd00::2", ID: "b", Allowlist: []string{"b.example:8080"}},
	}
	if got, _ := json.Marshal(st.Clients); string(got) != string(mustJSON(t, want)) {
		t.Errorf("reloaded state %s, want %s", got, mustJSON(t, want))
	}
	if !strings.Contains(ts2.logs.String(), "state loaded") {
		t.Errorf("no load log line: %s", ts2.logs)
	}
}

func TestConfiguredClientWinsOverSaved(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.json")
	if err := os.WriteFile(path, []byte(`{"version":1,"clients":[{"ip":"10.0.0.2","id":"saved","allowlist":["old.example"]}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	reg := proxy.NewRegistry()
	if err := reg.Register(proxy.Client{ID: "configured", IP: netip.MustParseAddr("10.0.0.2")}); err != nil {
		t.Fatal(err)
	}
	ts := start(t, Options{StateFile: path, Registry: reg})
	if c, _ := reg.Lookup(netip.MustParseAddr("10.0.0.2")); c.ID != "configured" {
		t.Errorf("client = %q, want the configured one", c.ID)
	}
	if !strings.Contains(ts.logs.String(), "saved client skipped") {
		t.Errorf("no skip warning: %s", ts.logs)
	}
}

func TestCorruptStateStartsEmpty(t *testing.T) {
	for name, body := range map[string]string{
		"truncated":     `{"version":1,"clients":[{"ip":"10.0`,
		"bad ip":        `{"version":1,"clients":[{"ip":"10.0.0.2","id":"a"},{"ip":"nope","id":"b"}]}`,
		"bad allowlist": `{"version":1,"clients":[{"ip":"10.0.0.2","id":"a","allowlist":["http://x/"]}]}`,
		"wrong version": `{"version":7,"clients":[]}`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
			ts := start(t, Options{StateFile: path})
			if n := len(ts.reg.List()); n != 0 {
				t.Errorf("registry has %d clients, want 0", n)
			}
			logs := ts.logs.String()
			if !strings.Contains(logs, "level=WARN") || !strings.Contains(logs, path) {
				t.Errorf("no warning naming %s: %s", path, logs)
			}
			// The daemon keeps working and overwrites the corrupt file on the next change.
			if code := ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.4","id":"new"}`, nil); code != 201 {
				t.Fatalf("register after corrupt state: %d", code)
			}
			if _, _, err := parseState(mustRead(t, path), nil); err != nil {
				t.Errorf("state file still bad after a change: %v", err)
			}
		})
	}
}

func TestStateWriteFailureIsReported(t *testing.T) {
	path := filepath.Join(t.TempDir(), "missing-dir", "state.json")
	ts := start(t, Options{StateFile: path})
	var e ErrorJSON
	if code := ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.2","id":"a"}`, &e); code != 500 || e.Error != "state_write_failed" {
		t.Errorf("got %d %+v, want 500 state_write_failed", code, e)
	}
}

func TestMetricsServesGatherer(t *testing.T) {
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "crackbox_test_total", Help: "t"})
	reg.MustRegister(c)
	c.Add(7)
	ts := start(t, Options{Gatherer: reg})
	resp, err := http.Get(ts.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "crackbox_test_total 7") {
		t.Errorf("metrics body lacks the counter:\n%s", body)
	}
}

func TestCheckListen(t *testing.T) {
	tests := []struct {
		addr, secret string
		ok           bool
	}{
		{"127.0.0.1:3129", "", true},
		{"[::1]:3129", "", true},
		{"localhost:3129", "", true},
		{"", "", true},
		{":3129", "", false},
		{"0.0.0.0:3129", "", false},
		{"10.1.2.3:3129", "", false},
		{":3129", "x", true},
	}
	for _, tt := range tests {
		err := CheckListen(tt.addr, tt.secret)
		if (err == nil) != tt.ok {
			t.Errorf("CheckListen(%q, %q) = %v, want ok=%v", tt.addr, tt.secret, err, tt.ok)
		}
		if err != nil && (!errors.Is(err, ErrInsecureListen) || !strings.Contains(err.Error(), "CRACKBOX_ADMIN_SECRET")) {
			t.Errorf("error %v should wrap ErrInsecureListen and name the fix", err)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
