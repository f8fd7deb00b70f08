package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/admin"
)

// buildCrackbox compiles the binary once per test into a temp dir.
func buildCrackbox(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary; skipped in -short")
	}
	bin := filepath.Join(t.TempDir(), "crackbox")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// daemonProc is a running "crackbox proxy serve" whose stderr is scanned for log lines.
type daemonProc struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	seen  chan struct{} // pinged on every new line
	done  chan error
}

func startDaemon(t *testing.T, bin string, env []string, args ...string) *daemonProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"proxy", "serve"}, args...)...)
	cmd.Env = env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &daemonProc{cmd: cmd, seen: make(chan struct{}, 1), done: make(chan error, 1)}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			d.mu.Lock()
			d.lines = append(d.lines, sc.Text())
			d.mu.Unlock()
			select {
			case d.seen <- struct{}{}:
			default:
			}
		}
	}()
	// exited, not cmd.ProcessState, tells the cleanup whether the daemon is
	// gone: Wait writes ProcessState in its own goroutine.
	exited := make(chan struct{})
	go func() {
		<-scanned
		err := cmd.Wait()
		close(exited)
		d.done <- err
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", d.log())
		}
	})
	return d
}

func (d *daemonProc) log() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return strings.Join(d.lines, "\n")
}

// waitLine waits for the n-th log line (1-based) matching re and returns its submatches.
func (d *daemonProc) waitLine(t *testing.T, re string, n int) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.After(20 * time.Second)
	for {
		d.mu.Lock()
		count := 0
		for _, l := range d.lines {
			if m := rx.FindStringSubmatch(l); m != nil {
				if count++; count == n {
					d.mu.Unlock()
					return m
				}
			}
		}
		d.mu.Unlock()
		select {
		case <-d.seen:
		case err := <-d.done:
			d.done <- err
			t.Fatalf("daemon exited (%v) before logging %q", err, re)
		case <-deadline:
			t.Fatalf("no log line %q", re)
		}
	}
}

// writeConfig writes a config that sends allowed.test and other.test to the
// loopback upstream and allows only the given entries for client 127.0.0.1.
func writeConfig(t *testing.T, path string, allow ...string) {
	t.Helper()
	quoted := make([]string, len(allow))
	for i, a := range allow {
		quoted[i] = fmt.Sprintf("%q", a)
	}
	body := fmt.Sprintf(`[proxy]
listen = "127.0.0.1:0"
transparent = ""
client = "127.0.0.1"
allow = [%s]
allow_cidrs = ["127.0.0.0/8"]
hosts = { "allowed.test" = ["127.0.0.1"], "other.test" = ["127.0.0.1"] }
drain_grace = "10s"
state_file = %q
decision_log = %q

[admin]
listen = "127.0.0.1:0"
secret = "test-secret"
`, strings.Join(quoted, ", "), filepath.Join(filepath.Dir(path), "state.json"),
		filepath.Join(filepath.Dir(path), "decisions.jsonl"))
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

func cleanEnv(t *testing.T) []string {
	home := t.TempDir()
	return []string{"HOME=" + home, "XDG_CONFIG_HOME=" + filepath.Join(home, "xdg"), "PATH=" + os.Getenv("PATH")}
}

func TestProxyServeDaemon(t *testing.T) {
	bin := buildCrackbox(t)
	release := make(chan struct{})
	entered := make(chan struct{}, 1)
	var releaseOnce sync.Once
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			entered <- struct{}{}
			<-release
		}
		io.WriteString(w, "hello from "+r.Host)
	}))
	t.Cleanup(upstream.Close)
	// Registered after Close so it runs first: a failed test must not leave
	// the slow handler blocking Close.
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "crackbox.toml")
	writeConfig(t, cfgPath, "allowed.test:"+port)
	env := cleanEnv(t)
	d := startDaemon(t, bin, env, "--config", cfgPath)
	m := d.waitLine(t, `msg="proxy serving" forward=(\S+) transparent=\S* admin=(\S+)`, 1)
	fwd, adm := m[1], m[2]

	client := &http.Client{Transport: &http.Transport{
		Proxy:             http.ProxyURL(&url.URL{Scheme: "http", Host: fwd}),
		DisableKeepAlives: true,
	}, Timeout: 10 * time.Second}
	get := func(host, path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + host + ":" + port + path)
		if err != nil {
			t.Fatalf("GET %s via proxy: %v", host, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	t.Run("file allowlist applies", func(t *testing.T) {
		if code, body := get("allowed.test", "/"); code != 200 || !strings.HasPrefix(body, "hello from allowed.test") {
			t.Errorf("allowed.test: %d %q", code, body)
		}
		if code, _ := get("other.test", "/"); code == 200 {
			t.Errorf("other.test allowed before reload")
		}
		// A decision is logged when its exchange ends, so the two lines may land in either
		// order, and the first may still be on its way when the second request returns.
		var log []byte
		eventually.Within(time.Minute, func() bool {
			var err error
			if log, err = os.ReadFile(filepath.Join(dir, "decisions.jsonl")); err != nil {
				t.Fatal(err)
			}
			return strings.Count(string(log), "\n") >= 2
		})
		var verdicts []string
		for _, line := range strings.Split(strings.TrimSpace(string(log)), "\n") {
			var d struct{ Host, Decision, Reason string }
			if err := json.Unmarshal([]byte(line), &d); err != nil {
				t.Fatalf("decision log line %q: %v", line, err)
			}
			verdicts = append(verdicts, d.Host+" "+d.Decision+" "+d.Reason)
		}
		sort.Strings(verdicts)
		if want := []string{"allowed.test allow ", "other.test deny blocked-by-allowlist"}; strings.Join(verdicts, "|") != strings.Join(want, "|") {
			t.Errorf("decision log %q, want %q", verdicts, want)
		}
	})

	t.Run("state command", func(t *testing.T) {
		out, err := exec.Command(bin, "state", "--config", cfgPath, "--admin", "http://"+adm, "--json").Output()
		if err != nil {
			t.Fatalf("state --json: %v", err)
		}
		var st admin.StateJSON
		if err := json.Unmarshal(out, &st); err != nil {
			t.Fatalf("state --json output %q: %v", out, err)
		}
		if len(st.Clients) != 1 || st.Clients[0].IP != "127.0.0.1" || st.Clients[0].Allowlist[0] != "allowed.test:"+port {
			t.Errorf("state = %+v", st)
		}
		cmd := exec.Command(bin, "state", "--admin", adm)
		cmd.Env = append(cleanEnv(t), "CRACKBOX_ADMIN_SECRET=test-secret")
		out, err = cmd.Output()
		if err != nil {
			t.Fatalf("state table: %v", err)
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "IP  ") ||
			!regexp.MustCompile(`^127\.0\.0\.1\s+client\s+allowed\.test:\d+$`).MatchString(lines[1]) {
			t.Errorf("table output:\n%s", out)
		}
		cmd = exec.Command(bin, "state", "--admin", adm, "--secret", "wrong")
		cmd.Env = cleanEnv(t)
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "401") {
			t.Errorf("wrong secret: err %v, output %q", err, out)
		}
	})

	t.Run("sighup reload changes allowlist", func(t *testing.T) {
		writeConfig(t, cfgPath, "other.test:"+port)
		if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		d.waitLine(t, `msg="config reloaded"`, 1)
		if code, _ := get("other.test", "/"); code != 200 {
			t.Errorf("other.test after reload: %d", code)
		}
		if code, _ := get("allowed.test", "/"); code == 200 {
			t.Errorf("allowed.test still allowed after reload")
		}
		// The configured client's new list is what the API and state file show.
		st, err := fetchState(context.Background(), adm, "test-secret")
		if err != nil || len(st.Clients) != 1 || strings.Join(st.Clients[0].Allowlist, ",") != "other.test:"+port {
			t.Errorf("state after reload: %+v %v", st, err)
		}
		saved, _ := os.ReadFile(filepath.Join(dir, "state.json"))
		if !strings.Contains(string(saved), "other.test:"+port) || strings.Contains(string(saved), "allowed.test") {
			t.Errorf("state file after reload:\n%s", saved)
		}
	})

	t.Run("bad file on sighup keeps old config", func(t *testing.T) {
		if err := os.WriteFile(cfgPath, []byte("[proxy]\nallow = [\"x.test\"]\nbogus = 1\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		d.cmd.Process.Signal(syscall.SIGHUP)
		m := d.waitLine(t, `msg="reload failed, keeping the old config".*`, 1)
		if !strings.Contains(m[0], "proxy.bogus") || !strings.Contains(m[0], ":3:") {
			t.Errorf("reload error should name key and line: %s", m[0])
		}
		if code, _ := get("other.test", "/"); code != 200 {
			t.Errorf("other.test after failed reload: %d", code)
		}
	})

	t.Run("sigterm drains and exits 0", func(t *testing.T) {
		type result struct {
			body string
			err  error
		}
		slow := make(chan result, 1)
		go func() {
			resp, err := client.Get("http://other.test:" + port + "/slow")
			if err != nil {
				slow <- result{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			slow <- result{string(b), err}
		}()
		// Wait until the request is at the upstream before asking the daemon to stop.
		select {
		case <-entered:
		case <-time.After(10 * time.Second):
			t.Fatal("slow request never reached the upstream")
		}
		if err := d.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		d.waitLine(t, `msg=draining`, 1)
		select {
		case err := <-d.done:
			t.Fatalf("daemon exited (%v) with a tunnel still open", err)
		case <-time.After(300 * time.Millisecond):
		}
		if c, err := net.DialTimeout("tcp", fwd, time.Second); err == nil {
			c.Close()
			t.Errorf("forward listener still accepts during drain")
		}
		releaseOnce.Do(func() { close(release) })
		r := <-slow
		if r.err != nil || !strings.Contains(r.body, "hello from other.test") {
			t.Errorf("in-flight request during drain: %q %v", r.body, r.err)
		}
		select {
		case err := <-d.done:
			if err != nil {
				t.Errorf("daemon exit: %v", err)
			}
		case <-time.After(15 * time.Second):
			t.Fatal("daemon did not exit after drain")
		}
	})
}

func TestProxyServeStartErrors(t *testing.T) {
	bin := buildCrackbox(t)
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("[proxy]\nlisten = \"127.0.0.1:0\"\n\n[admin]\nlisten = \":0\"\n"), 0o600)
	unknown := filepath.Join(dir, "unknown.toml")
	os.WriteFile(unknown, []byte("[proxy]\nlisten = \"127.0.0.1:0\"\nlisen = \"x\"\n"), 0o600)
	tests := []struct {
		name string
		args []string
		env  []string
		want []string
	}{
		{"missing explicit config", []string{"--config", filepath.Join(dir, "nope.toml")}, nil, []string{"nope.toml", "does not exist"}},
		{"unknown key", []string{"--config", unknown}, nil, []string{"unknown.toml:3", "proxy.lisen"}},
		{"non-loopback admin without secret", []string{"--config", bad}, nil, []string{"needs a secret", "CRACKBOX_ADMIN_SECRET"}},
		{"both listeners off", []string{"--listen", "", "--transparent", ""}, nil, []string{"enable at least one"}},
		{"env disables listeners", nil, []string{"CRACKBOX_PROXY_LISTEN=", "CRACKBOX_PROXY_TRANSPARENT="}, []string{"enable at least one"}},
		{"bad allow flag", []string{"--listen", "127.0.0.1:0", "--transparent", "", "--admin", "", "--allow", "http://x/"}, nil, []string{"proxy.allow", "not a URL"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(bin, append([]string{"proxy", "serve"}, tt.args...)...)
			cmd.Env = append(cleanEnv(t), tt.env...)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("want failure, got success:\n%s", out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
		})
	}
}
