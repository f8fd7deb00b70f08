package admin

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
	"github.com/crackbox/crackbox/pkg/secrets"
)

const apiValue = "sk-live-daemon-VALUE-0123456789"

// daemon is a forward proxy and its admin API on one registry, as
// `crackbox proxy serve` runs them.
type daemon struct {
	proxyAddr string
	admin     *testServer
	decisions *nettest.Buffer
	logs      *nettest.Buffer
}

func startDaemon(t *testing.T, u *nettest.HTTPSEcho, opts Options) *daemon {
	t.Helper()
	pool := u.Roots()
	d := &daemon{decisions: &nettest.Buffer{}, logs: &nettest.Buffer{}}
	reg := proxy.NewRegistry()
	px, err := proxy.New(proxy.Options{
		AllowCIDRs:    []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Hosts:         map[string][]netip.Addr{"api.example.com": {netip.MustParseAddr("127.0.0.1")}},
		DialTimeout:   5 * time.Second,
		UpstreamRoots: pool,
		DecisionLog:   d.decisions,
		Log:           slog.New(slog.NewTextHandler(d.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.ServeForward(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		px.Shutdown(ctx)
	})
	d.proxyAddr = ln.Addr().String()
	opts.Registry = reg
	d.admin = start(t, opts)
	return d
}

// get fetches path from api.example.com through the proxy as a guest would:
// trusting only caPEM and sending the placeholder as a bearer token.
func (d *daemon) get(t *testing.T, u *nettest.HTTPSEcho, caPEM []byte, placeholder, path string) (int, string) {
	t.Helper()
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("CA %q is not PEM", caPEM)
	}
	pu, _ := url.Parse("http://" + d.proxyAddr)
	c := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		Proxy: http.ProxyURL(pu), TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true,
	}}
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d%s", u.Port(), path), nil)
	req.Header.Set("Authorization", "Bearer "+placeholder)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s through the proxy: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var h strings.Builder
	resp.Header.Write(&h)
	return resp.StatusCode, h.String() + string(b)
}

// rawGet returns the body of an admin GET, for scanning as bytes.
func (ts *testServer) rawGet(t *testing.T, path string) []byte {
	t.Helper()
	resp, err := http.Get(ts.url + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, b)
	}
	return b
}

// valueForms are the value and its base64 at every byte alignment (the
// stable middle of each), as a leak would show in a file or body.
func valueForms(v string) []string {
	out := []string{v}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", pad) + v))
		out = append(out, enc[4:len(enc)-4])
	}
	return out
}

func noValueIn(t *testing.T, what string, b []byte) {
	t.Helper()
	for _, f := range valueForms(apiValue) {
		if bytes.Contains(b, []byte(f)) {
			t.Errorf("%s holds the value (as %q)", what, f)
		}
	}
}

func newKey(t *testing.T) (string, *secrets.Ring) {
	t.Helper()
	k := secrets.GenerateKey()
	ring, err := LoadStateKey(k, "", nil)
	if err != nil || ring == nil {
		t.Fatalf("LoadStateKey: %v %v", ring, err)
	}
	return k, ring
}

func registerBody(t *testing.T, u *nettest.HTTPSEcho) string {
	return fmt.Sprintf(`{"ip":"127.0.0.1","id":"sandbox-1","allowlist":["api.example.com:%d"],
		"secrets":[{"name":"API_KEY","hosts":["api.example.com"],"value":%q}]}`, u.Port(), apiValue)
}

// TestRegisterSecrets registers a client with a secret through the admin
// API: its requests to the bound host carry the value, nothing the daemon
// shows or writes does, and a restart under the same key restores the
// client with the placeholder and CA its guest already holds.
func TestRegisterSecrets(t *testing.T) {
	u := nettest.NewHTTPSEcho(t)
	_, ring := newKey(t)
	state := filepath.Join(t.TempDir(), "state.json")
	d := startDaemon(t, u, Options{StateFile: state, StateKey: ring})

	var c ClientJSON
	if code := d.admin.do(t, "POST", "/v1/register", "", registerBody(t, u), &c); code != 201 {
		t.Fatalf("register: %d %+v", code, c)
	}
	if len(c.Secrets) != 1 || c.Secrets[0].Name != "API_KEY" || !strings.HasPrefix(c.Secrets[0].Placeholder, "crackbox-secret-") {
		t.Fatalf("register response secrets %+v", c.Secrets)
	}
	ph := c.Secrets[0].Placeholder
	ca := d.admin.rawGet(t, "/v1/clients/sandbox-1/ca")
	if byIP := d.admin.rawGet(t, "/v1/clients/127.0.0.1/ca"); !bytes.Equal(ca, byIP) {
		t.Fatal("the CA by ID and by IP differ")
	}

	code, body := d.get(t, u, ca, ph, "/v1/models?key="+ph)
	if code != 200 || !strings.Contains(u.Requests(), "Authorization: Bearer "+apiValue) ||
		!strings.Contains(u.Requests(), "/v1/models?key="+apiValue) {
		t.Fatalf("status %d, upstream saw:\n%s", code, u.Requests())
	}
	if !strings.Contains(body, "Bearer "+ph) {
		t.Errorf("the echoed header did not come back as the placeholder:\n%s", body)
	}
	noValueIn(t, "the response", []byte(body))

	for _, p := range []string{"/v1/state", "/metrics"} {
		b := d.admin.rawGet(t, p)
		noValueIn(t, p, b)
		if p == "/v1/state" && !bytes.Contains(b, []byte(ph)) {
			t.Errorf("state does not list the secret: %s", b)
		}
	}
	file := mustRead(t, state)
	noValueIn(t, "the state file", file)
	if !bytes.Contains(file, []byte(`"sealed_secrets"`)) || bytes.Contains(file, []byte(ph)) {
		t.Errorf("state file does not hold the secrets sealed:\n%s", file)
	}
	noValueIn(t, "the admin log", []byte(d.admin.logs.String()))
	noValueIn(t, "the proxy log", []byte(d.logs.String()))
	noValueIn(t, "the decision log", []byte(d.decisions.String()))

	// The restarted daemon: same key, fresh registry and proxy.
	d2 := startDaemon(t, u, Options{StateFile: state, StateKey: ring})
	var st StateJSON
	d2.admin.do(t, "GET", "/v1/state", "", "", &st)
	if len(st.Clients) != 1 || len(st.Clients[0].Secrets) != 1 || st.Clients[0].Secrets[0].Placeholder != ph {
		t.Fatalf("restored state %+v, want the client with placeholder %s", st, ph)
	}
	if ca2 := d2.admin.rawGet(t, "/v1/clients/sandbox-1/ca"); !bytes.Equal(ca, ca2) {
		t.Fatal("the restored client has another CA: its guest's trust no longer holds")
	}
	before := strings.Count(u.Requests(), apiValue)
	if code, body := d2.get(t, u, ca, ph, "/again"); code != 200 || strings.Count(u.Requests(), apiValue) != before+1 {
		t.Fatalf("after restart: status %d %s, upstream:\n%s", code, body, u.Requests())
	}
}

// TestStateKeyRefusals: sealed secrets never open under a wrong or missing
// key, and without a key a client with secrets is not saved at all.
func TestStateKeyRefusals(t *testing.T) {
	u := nettest.NewHTTPSEcho(t)
	_, ring := newKey(t)
	state := filepath.Join(t.TempDir(), "state.json")
	d := startDaemon(t, u, Options{StateFile: state, StateKey: ring})
	if code := d.admin.do(t, "POST", "/v1/register", "", registerBody(t, u), nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	_, wrong := newKey(t)
	for name, tc := range map[string]struct {
		key  *secrets.Ring
		want error
	}{
		"wrong key": {wrong, ErrStateKey},
		"no key":    {nil, ErrNoStateKey},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Options{Registry: proxy.NewRegistry(), StateFile: state, StateKey: tc.key,
				Log: slog.New(slog.DiscardHandler)})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), EnvStateKey) || !strings.Contains(err.Error(), state) {
				t.Fatalf("New = %v, want %v naming %s and the file", err, tc.want, EnvStateKey)
			}
			noValueIn(t, "the error", []byte(err.Error()))
		})
	}

	t.Run("no key, nothing saved", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.json")
		ts := start(t, Options{StateFile: path})
		if code := ts.do(t, "POST", "/v1/register", "", registerBody(t, u), nil); code != 201 {
			t.Fatalf("register: %d", code)
		}
		ts.do(t, "POST", "/v1/register", "", `{"ip":"10.0.0.9","id":"plain"}`, nil)
		file := mustRead(t, path)
		noValueIn(t, "the state file", file)
		if bytes.Contains(file, []byte("sandbox-1")) || !bytes.Contains(file, []byte("plain")) {
			t.Errorf("state file:\n%s", file)
		}
		if !strings.Contains(ts.logs.String(), "client secrets not saved") || !strings.Contains(ts.logs.String(), EnvStateKey) {
			t.Errorf("no warning naming the fix:\n%s", ts.logs)
		}
	})

	t.Run("moved blob does not open", func(t *testing.T) {
		file := mustRead(t, state)
		moved := bytes.Replace(file, []byte(`"id": "sandbox-1"`), []byte(`"id": "sandbox-2"`), 1)
		path := filepath.Join(t.TempDir(), "state.json")
		os.WriteFile(path, moved, 0o600)
		if _, err := New(Options{Registry: proxy.NewRegistry(), StateFile: path, StateKey: ring,
			Log: slog.New(slog.DiscardHandler)}); !errors.Is(err, ErrStateKey) {
			t.Fatalf("a sealed blob under another client's ID opened: %v", err)
		}
	})
}

// A client whose sealed secrets open but whose CA has expired is left out;
// the rest of the file loads.
func TestStateExpiredCASkipsClient(t *testing.T) {
	_, ring := newKey(t)
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "old run CA"},
		NotBefore: time.Now().Add(-48 * time.Hour), NotAfter: time.Now().Add(-time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, _ := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	keyDER, _ := x509.MarshalPKCS8PrivateKey(key)
	plain, _ := json.Marshal(inject.Saved{CACert: der, CAKey: keyDER, Secrets: []inject.SavedSecret{{
		Name: "API_KEY", Hosts: []string{"api.test"}, Value: apiValue,
		Placeholder: "crackbox-secret-0123456789abcdef0123456789abcdef"}}})
	sealed, err := ring.Seal(secretAAD("10.0.0.2", "old"), plain)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := json.Marshal(stateFile{Version: 1, Clients: []savedClient{
		{IP: "10.0.0.2", ID: "old", Allowlist: []string{"api.test"}, SecretNames: []string{"API_KEY"}, Sealed: sealed},
		{IP: "10.0.0.3", ID: "plain", Allowlist: []string{"a.test"}},
	}})
	path := filepath.Join(t.TempDir(), "state.json")
	os.WriteFile(path, st, 0o600)
	ts := start(t, Options{StateFile: path, StateKey: ring})
	if cs := ts.reg.List(); len(cs) != 1 || cs[0].ID != "plain" {
		t.Fatalf("registry %+v, want only the plain client", cs)
	}
	if !strings.Contains(ts.logs.String(), "saved client skipped") || !strings.Contains(ts.logs.String(), "expired") {
		t.Errorf("no warning naming the skipped client:\n%s", ts.logs)
	}
	noValueIn(t, "the log", []byte(ts.logs.String()))
}

func TestRegisterBadSecret(t *testing.T) {
	ts := start(t, Options{})
	for name, body := range map[string]string{
		"wildcard host": `{"ip":"10.0.0.2","secrets":[{"name":"K","hosts":["*.x.test"],"value":"` + apiValue + `"}]}`,
		"no host":       `{"ip":"10.0.0.2","secrets":[{"name":"K","value":"` + apiValue + `"}]}`,
		"bad name":      `{"ip":"10.0.0.2","secrets":[{"name":"K-1","hosts":["x.test"],"value":"` + apiValue + `"}]}`,
		"short value":   `{"ip":"10.0.0.2","secrets":[{"name":"K","hosts":["x.test"],"value":"short"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			var e ErrorJSON
			if code := ts.do(t, "POST", "/v1/register", "", body, &e); code != 400 || e.Error != "invalid_secret" {
				t.Fatalf("got %d %+v", code, e)
			}
			noValueIn(t, "the error", []byte(e.Message))
		})
	}
	if n := len(ts.reg.List()); n != 0 {
		t.Errorf("a refused registration left %d clients", n)
	}
	noValueIn(t, "the log", []byte(ts.logs.String()))
}

func TestLoadStateKey(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "key")
	os.WriteFile(good, []byte(secrets.GenerateKey()+"\n"), 0o600)
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("not-a-key"), 0o600)
	if r, err := LoadStateKey("", "", nil); r != nil || err != nil {
		t.Errorf("no key: %v %v", r, err)
	}
	if r, err := LoadStateKey("", good, nil); r == nil || err != nil {
		t.Errorf("key file: %v %v", r, err)
	}
	if _, err := LoadStateKey("", bad, nil); !errors.Is(err, secrets.ErrBadKey) || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad key file: %v", err)
	}
	if _, err := LoadStateKey("", filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("missing key file accepted")
	}
	if _, err := LoadStateKey("short", good, nil); !errors.Is(err, secrets.ErrBadKey) || !strings.Contains(err.Error(), EnvStateKey) {
		t.Errorf("bad env key: %v", err)
	}
}

// A state key file others may read still loads, with a warning in the logger given.
func TestLoadStateKeyWarnsOfAReadableFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(p, []byte(secrets.GenerateKey()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := LoadStateKey("", p, slog.New(slog.NewTextHandler(&buf, nil))); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(buf.String(), `level=WARN msg="state key file is readable by others"`) {
		t.Errorf("log %q, want the readable key file warned of", buf.String())
	}
}
