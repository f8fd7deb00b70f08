package main

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
)

// TestAdminWithoutSecretNeedsToken is a local user going for a daemon started with no
// admin.secret: its admin API listens on loopback, which every local user can dial, and
// registering or widening a client there opens any sandbox's egress. The daemon guards
// it with a fresh token only its own user can read, and `crackbox state` finds it.
func TestAdminWithoutSecretNeedsToken(t *testing.T) {
	testreq.Root(t, "reads the daemon's token file as another local user (uid 65534)")
	bin := buildCrackbox(t)
	dir := t.TempDir()
	// Others may pass through, as through /run: only the token file's mode keeps them out.
	if err := os.Chmod(dir, 0o711); err != nil {
		t.Fatal(err)
	}
	base := filepath.Join(dir, "run")
	cfg := filepath.Join(dir, "proxy.toml")
	body := "[proxy]\nlisten = \"127.0.0.1:0\"\ntransparent = \"\"\n[admin]\nlisten = \"127.0.0.1:0\"\n"
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	env := append(cleanEnv(t), "CRACKBOX_RUN_DIR="+base)
	d := startDaemon(t, bin, env, "--config", cfg)
	adm := d.waitLine(t, `msg="proxy serving" .*admin=(\S+)`, 1)[1]
	_, port, _ := net.SplitHostPort(adm)
	tokenFile := filepath.Join(base, "admin-"+port+".token")

	for _, c := range []struct{ method, path, body string }{
		{"POST", "/v1/register", `{"ip": "127.0.0.9", "allowlist": ["*"]}`},
		{"PATCH", "/v1/clients/127.0.0.9", `{"add": ["evil.test"]}`},
		{"GET", "/v1/state", ""},
	} {
		req, _ := http.NewRequest(c.method, "http://"+adm+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s %s without a token: %s, want 401", c.method, c.path, resp.Status)
		}
	}

	fi, err := os.Lstat(tokenFile)
	if err != nil {
		t.Fatalf("token file: %v", err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode() != 0o600 || st.Uid != uint32(os.Geteuid()) {
		t.Errorf("token file %s: mode %v uid %d, want -rw------- and uid %d", tokenFile, fi.Mode(), st.Uid, os.Geteuid())
	}
	cat := exec.Command("cat", tokenFile)
	cat.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cat.CombinedOutput(); err == nil || !strings.Contains(string(out), "Permission denied") {
		t.Errorf("uid 65534 read the token file: err %v, output %q", err, out)
	}

	state := exec.Command(bin, "state", "--admin", adm)
	state.Env = env
	if out, err := state.CombinedOutput(); err != nil {
		t.Errorf("crackbox state as the daemon's user: %v\n%s", err, out)
	}
	elsewhere := exec.Command(bin, "state", "--admin", adm)
	elsewhere.Env = append(cleanEnv(t), "CRACKBOX_RUN_DIR="+t.TempDir())
	out, err := elsewhere.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "401") || !strings.Contains(string(out), "no daemon token at") {
		t.Errorf("crackbox state without the token: err %v, output %q; want a 401 that says where it looked", err, out)
	}

	d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(30 * time.Second):
		t.Fatal("daemon did not stop on SIGTERM")
	}
	if _, err := os.Lstat(tokenFile); err == nil {
		t.Errorf("token file %s left after the daemon stopped", tokenFile)
	}
}
