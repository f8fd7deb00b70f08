package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/secrets"
)

// TestProxyServeSealedSecrets drives the daemon: a client registered with a
// secret is saved sealed under $CRACKBOX_STATE_KEY, the daemon refuses to
// start under another key or none, and starts with it under the right one.
func TestProxyServeSealedSecrets(t *testing.T) {
	bin := buildCrackbox(t)
	dir := t.TempDir()
	cfg, state := filepath.Join(dir, "crackbox.toml"), filepath.Join(dir, "state.json")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`[proxy]
listen = "127.0.0.1:0"
transparent = ""
state_file = %q
[admin]
listen = "127.0.0.1:0"
secret = "test-secret"
`, state)), 0o600)
	const value = "sk-live-daemon-sealed-0123456789"
	key := secrets.GenerateKey()
	withKey := func(k string) []string { return append(cleanEnv(t), "CRACKBOX_STATE_KEY="+k) }

	serve := func(env []string) (*daemonProc, string) {
		d := startDaemon(t, bin, env, "--config", cfg)
		m := d.waitLine(t, `msg="proxy serving" forward=\S+ transparent=\S* admin=(\S+)`, 1)
		return d, "http://" + m[1]
	}
	stop := func(d *daemonProc) {
		d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.done:
		case <-time.After(30 * time.Second):
			t.Fatal("daemon did not stop")
		}
	}
	call := func(method, url, body string) (int, string) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer test-secret")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	forms := []string{value}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", pad) + value))
		forms = append(forms, enc[4:len(enc)-4])
	}
	noValue := func(what, s string) {
		t.Helper()
		for _, f := range forms {
			if strings.Contains(s, f) {
				t.Errorf("%s holds the value (as %q)", what, f)
			}
		}
	}

	d, url := serve(withKey(key))
	code, body := call("POST", url+"/v1/register",
		`{"ip":"10.9.0.2","id":"sb","allowlist":["api.test"],"secrets":[{"name":"API_KEY","hosts":["api.test"],"value":"`+value+`"}]}`)
	if code != 201 {
		t.Fatalf("register: %d %s", code, body)
	}
	noValue("the register response", body)
	_, st := call("GET", url+"/v1/state", "")
	noValue("the state", st)
	if code, ca := call("GET", url+"/v1/clients/sb/ca", ""); code != 200 || !strings.Contains(ca, "BEGIN CERTIFICATE") {
		t.Errorf("client CA: %d %q", code, ca)
	}
	stop(d)
	noValue("the daemon log", d.log())
	file, _ := os.ReadFile(state)
	noValue("the state file", string(file))
	if !bytes.Contains(file, []byte("sealed_secrets")) {
		t.Fatalf("state file without the sealed client:\n%s", file)
	}

	for name, env := range map[string][]string{"wrong key": withKey(secrets.GenerateKey()), "no key": cleanEnv(t)} {
		cmd := exec.Command(bin, "proxy", "serve", "--config", cfg)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "CRACKBOX_STATE_KEY") || !strings.Contains(string(out), state) {
			t.Errorf("%s: err %v, output lacks the fix:\n%s", name, err, out)
		}
		noValue(name+" output", string(out))
	}

	d, url = serve(withKey(key))
	defer stop(d)
	if _, st := call("GET", url+"/v1/state", ""); !strings.Contains(st, `"API_KEY"`) {
		t.Errorf("restarted daemon lost the client's secret: %s", st)
	}
}
