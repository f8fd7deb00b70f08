package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// fleetReplica is one real "crackbox proxy serve --registry" process.
type fleetReplica struct {
	name, fwd, adm, dir string
	proc                *daemonProc
}

func startReplica(t *testing.T, bin, natsURL, name string) *fleetReplica {
	t.Helper()
	return startReplicaWith(t, bin, natsURL, name, func(dir string) string {
		return fmt.Sprintf("registry_insecure = true\nregistry_sign_key = %q\n", writeSignKey(t, dir))
	})
}

// startReplicaWith is startReplica with the [proxy] lines of registry
// identity and keys that auth returns, given the replica's dir.
func startReplicaWith(t *testing.T, bin, natsURL, name string, auth func(dir string) string) *fleetReplica {
	t.Helper()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`[proxy]
listen = "127.0.0.1:0"
transparent = ""
allow_cidrs = ["127.0.0.0/8"]
hosts = { "allowed.test" = ["127.0.0.1"], "other.test" = ["127.0.0.1"] }
drain_grace = "1s"
decision_log = %q
registry = %q
replica = %q
%s
[admin]
listen = "127.0.0.1:0"
secret = "test-secret"
`, filepath.Join(dir, "decisions.jsonl"), natsURL, name, auth(dir))
	path := filepath.Join(dir, "crackbox.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	p := startDaemon(t, bin, cleanEnv(t), "--config", path)
	m := p.waitLine(t, `msg="proxy serving" forward=(\S+) transparent=\S* admin=(\S+)`, 1)
	return &fleetReplica{name: name, fwd: m[1], adm: m[2], dir: dir, proc: p}
}

// fleetSignSeed is the admin API key every test replica signs with.
var fleetSignSeed = func() []byte {
	kp, err := nkeys.CreateAccount()
	if err != nil {
		panic(err)
	}
	seed, _ := kp.Seed()
	return seed
}()

func writeSignKey(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "registry-sign.nk")
	if err := os.WriteFile(path, fleetSignSeed, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// verdict fetches host through the replica's forward listener: the status
// and the refusal reason, if any. It speaks HTTP by hand because the proxy
// answers an unknown client before reading its request, which net/http's
// client may take for a response on an idle connection; a reset in that race
// is retried.
func (r *fleetReplica) verdict(t *testing.T, host, port string) (int, string) {
	t.Helper()
	var resp *http.Response
	var err error
	if !eventually.Within(10*time.Second, func() bool { resp, err = r.get(host + ":" + port); return err == nil }) {
		t.Fatalf("%s: GET %s: %v", r.name, host, err)
	}
	return resp.StatusCode, resp.Header.Get(proxy.ErrorHeader)
}

func (r *fleetReplica) get(hostport string) (*http.Response, error) {
	c, err := net.DialTimeout("tcp", r.fwd, 10*time.Second)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	req := "GET http://" + hostport + "/ HTTP/1.1\r\nHost: " + hostport + "\r\nConnection: close\r\n\r\n"
	if _, err := io.WriteString(c, req); err != nil {
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return nil, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp, err
}

// admin sends one admin API request and returns the status and body.
func (r *fleetReplica) admin(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, "http://"+r.adm+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer test-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %s %s: %v", r.name, method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyFleet(t *testing.T) {
	bin := buildCrackbox(t)
	cluster := natstest.Start(t, 3)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello from "+r.Host)
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	var reps []*fleetReplica
	for i := 1; i <= 3; i++ {
		reps = append(reps, startReplica(t, bin, cluster.URL(), fmt.Sprintf("r%d", i)))
	}
	enforces := func(r *fleetReplica, host string, code int, reason string) func() bool {
		return func() bool {
			c, why := r.verdict(t, host, port)
			return c == code && why == reason
		}
	}
	allowed, other := "allowed.test", "other.test"

	for _, r := range reps {
		if c, why := r.verdict(t, allowed, port); c == 200 || why != proxy.ReasonUnknownClient {
			t.Fatalf("%s before any registration: %d %q, want a refusal as unknown-client", r.name, c, why)
		}
	}
	reg := fmt.Sprintf(`{"ip":"127.0.0.1","id":"c1","allowlist":["%s:%s"]}`, allowed, port)
	if c, body := reps[0].admin(t, "POST", "/v1/register", reg); c != http.StatusCreated {
		t.Fatalf("register on r1: %d %s", c, body)
	}
	for _, r := range reps[1:] {
		eventually.True(t, 90*time.Second, r.name+" allows the client registered on r1", enforces(r, allowed, 200, ""))
		if c, why := r.verdict(t, other, port); c == 200 || why != proxy.ReasonAllowlist {
			t.Errorf("%s: other.test %d %q, want blocked-by-allowlist", r.name, c, why)
		}
	}
	if c, body := reps[1].admin(t, "POST", "/v1/register", reg); c != http.StatusConflict {
		t.Errorf("second register of the address on r2: %d %s, want 409", c, body)
	}

	patch := fmt.Sprintf(`{"add":["%s:%s"]}`, other, port)
	if c, body := reps[2].admin(t, "PATCH", "/v1/clients/127.0.0.1", patch); c != http.StatusOK {
		t.Fatalf("patch on r3: %d %s", c, body)
	}
	for _, r := range reps[:2] {
		eventually.True(t, 90*time.Second, r.name+" applies the PATCH made on r3", enforces(r, other, 200, ""))
	}
	if c, body := reps[1].admin(t, "POST", "/v1/unregister", `{"ip":"127.0.0.1"}`); c != http.StatusOK {
		t.Fatalf("unregister on r2: %d %s", c, body)
	}
	for _, r := range reps {
		eventually.True(t, 90*time.Second, r.name+" refuses the client deleted on r2", enforces(r, allowed, http.StatusForbidden, proxy.ReasonUnknownClient))
	}

	t.Run("one NATS node down", func(t *testing.T) {
		cluster.StopNode(0)
		eventually.True(t, 90*time.Second, "register on r1 with a node down", func() bool {
			c, _ := reps[0].admin(t, "POST", "/v1/register", reg)
			return c == http.StatusCreated || c == http.StatusConflict
		})
		for _, r := range reps {
			eventually.True(t, 90*time.Second, r.name+" allows the client registered with a node down", enforces(r, allowed, 200, ""))
		}
	})

	t.Run("NATS stopped", func(t *testing.T) {
		cluster.StopNode(1)
		cluster.StopNode(2)
		for _, r := range reps {
			eventually.True(t, 90*time.Second, r.name+" reports degraded in /health", func() bool {
				_, body := r.admin(t, "GET", "/health", "")
				return strings.Contains(body, `"registry": "degraded"`) && strings.Contains(body, `"registry_since"`)
			})
			eventually.True(t, 90*time.Second, r.name+" reports degraded in metrics", func() bool {
				_, body := r.admin(t, "GET", "/metrics", "")
				return strings.Contains(body, "\ncrackbox_registry_degraded 1")
			})
			if c, why := r.verdict(t, allowed, port); c != 200 {
				t.Errorf("%s without NATS: allowed.test %d %q, want the last registry enforced", r.name, c, why)
			}
			if c, why := r.verdict(t, other, port); c == 200 || why != proxy.ReasonAllowlist {
				t.Errorf("%s without NATS: other.test %d %q, want blocked-by-allowlist", r.name, c, why)
			}
		}
		if c, body := reps[0].admin(t, "POST", "/v1/unregister", `{"ip":"127.0.0.1"}`); c != http.StatusServiceUnavailable ||
			!strings.Contains(body, "registry_unavailable") {
			t.Errorf("unregister without NATS: %d %s, want 503 registry_unavailable", c, body)
		}
		if c, _ := reps[0].verdict(t, allowed, port); c != 200 {
			t.Errorf("a refused unregister changed r1's registry: allowed.test %d", c)
		}

		for i := range 3 {
			cluster.StartNode(i)
		}
		cluster.WaitReady()
		for _, r := range reps {
			eventually.True(t, 90*time.Second, r.name+" follows the registry again", func() bool {
				_, body := r.admin(t, "GET", "/health", "")
				return strings.Contains(body, `"registry": "ok"`) && strings.Contains(body, `"registry_nats": "insecure (--insecure-nats)`)
			})
			if !strings.Contains(r.proc.log(), "registry nats without required credentials or tls") {
				t.Errorf("%s: --insecure-nats not named in the log", r.name)
			}
		}
		eventually.True(t, 90*time.Second, "patch on r2 after NATS returns", func() bool {
			c, _ := reps[1].admin(t, "PATCH", "/v1/clients/127.0.0.1", fmt.Sprintf(`{"add":["%s:%s"]}`, other, port))
			return c == http.StatusOK
		})
		for _, r := range reps {
			eventually.True(t, 90*time.Second, r.name+" catches up with the PATCH made after NATS returned", enforces(r, other, 200, ""))
		}
	})

	t.Run("decision lines name the replica", func(t *testing.T) {
		for _, r := range reps {
			data, err := os.ReadFile(filepath.Join(r.dir, "decisions.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			line, _, _ := strings.Cut(string(data), "\n")
			var d struct{ Replica string }
			if err := json.Unmarshal([]byte(line), &d); err != nil || d.Replica != r.name {
				t.Errorf("%s decision line %q: replica %q (%v)", r.name, line, d.Replica, err)
			}
		}
	})
}

func TestProxyFleetBadInput(t *testing.T) {
	bin := buildCrackbox(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "nats://" + ln.Addr().String()
	ln.Close()
	authURL, _, seed := natstest.StartNKey(t)
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"unreachable", []string{"--registry", dead, "--insecure-nats"}, []string{"proxy.registry " + dead, "no NATS server reachable"}},
		{"wrong nkey", []string{"--registry", authURL, "--insecure-nats"}, []string{"proxy.registry " + authURL, "refused the credentials", "proxy.registry_nkey"}},
		{"missing creds file", []string{"--registry", authURL}, []string{"proxy.registry_creds", "no such file"}},
		{"not a NATS URL", []string{"--registry", "http://127.0.0.1:4222"}, []string{"proxy.registry", "nats://"}},
		{"with a state file", []string{"--registry", dead}, []string{"proxy.state_file", "proxy.registry"}},
		// Without credentials nothing is dialed: the refusal names the fix and the flag.
		{"no credentials", []string{"--registry", authURL}, []string{"proxy.registry", "without credentials", "proxy.registry_nkey", "--insecure-nats"}},
		{"credentials without tls", []string{"--registry", authURL}, []string{"proxy.registry", "TLS", "--insecure-nats"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append(cleanEnv(t), "CRACKBOX_PROXY_REGISTRY_SIGN_KEY="+writeSignKey(t, t.TempDir()))
			switch tc.name {
			case "wrong nkey":
				env = append(env, "CRACKBOX_PROXY_REGISTRY_NKEY="+seed)
			case "credentials without tls":
				env = append(env, "CRACKBOX_PROXY_REGISTRY_NKEY="+seed)
			case "missing creds file":
				env = append(env, "CRACKBOX_PROXY_REGISTRY_CREDS=/nonexistent/r.creds")
			case "with a state file":
				env = append(env, "CRACKBOX_PROXY_STATE_FILE="+filepath.Join(t.TempDir(), "s.json"))
			}
			args := append([]string{"proxy", "serve", "--listen", "127.0.0.1:0", "--transparent", "", "--admin", "127.0.0.1:0"}, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = env
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("started; want a refusal naming the input\n%s", out)
			}
			for _, w := range tc.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
