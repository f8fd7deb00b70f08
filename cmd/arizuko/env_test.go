package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/secrets"
)

// The loader reads the environment once, into typed values: flags win over
// variables, variables over the file.
func TestLoadConfigEnvironment(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arizuko.toml")
	os.WriteFile(p, []byte("data_dir = \"/from/file\"\n[turns]\nobserve_window_messages = 7\nobserve_window_chars = 900\n"), 0o600)
	vars := map[string]string{
		envConfig: p, envData: "/from/env", envServer: "http://env:1/", envToken: "env-token",
		envObserveChars: "1234", secrets.EnvKeyFile: "/etc/arizuko/key",
	}
	c, err := loadWith(&app{server: "http://flag:2"}, vars)
	if err != nil {
		t.Fatal(err)
	}
	if c.DataDir != "/from/env" || c.remote != "http://flag:2" || c.token != "env-token" {
		t.Errorf("data %q remote %q token %q", c.DataDir, c.remote, c.token)
	}
	if c.Turns.ObserveWindowMessages != 7 || c.Turns.ObserveWindowChars != 1234 {
		t.Errorf("observe window %d messages, %d chars", c.Turns.ObserveWindowMessages, c.Turns.ObserveWindowChars)
	}
	if c.Secrets.KeyFile != "/etc/arizuko/key" || !c.Secrets.fromEnv {
		t.Errorf("key file %q from env %v", c.Secrets.KeyFile, c.Secrets.fromEnv)
	}
}

// Variables that cannot be used stop every command with the variable's name
// and the fix, before anything runs.
func TestBadEnvironmentRefused(t *testing.T) {
	_, e := initData(t)
	for _, c := range []struct{ env, want string }{
		{"OBSERVE_WINDOW_MESSAGES=5", "rename it to $ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES"},
		{"OBSERVE_WINDOW_CHARS=5", "rename it to $ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS"},
		{"ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS=lots", `environment ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS: turns.observe_window_chars: invalid number "lots": write a whole number`},
		{"ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES=-1", "want a positive whole number"},
	} {
		ce := append(append([]string{}, e...), c.env)
		if _, stderr, err := az(t, ce, "folder", "ls"); err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%s arizuko folder ls: err=%v stderr=%q, want %q", c.env, err, stderr, c.want)
		}
		if out, err := serveRefusal(t, ce); err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s arizuko serve: err=%v output=%q, want %q", c.env, err, out, c.want)
		}
	}
}

// $ARIZUKO_SECRETS_KEY_FILE names the key ring's file: init leaves it to the
// operator and serve starts on it.
func TestServeUsesKeyFileFromEnv(t *testing.T) {
	keyFile := filepath.Join(t.TempDir(), "secrets.key")
	if err := os.WriteFile(keyFile, []byte(secrets.GenerateKey()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data, e := initData(t, secrets.EnvKeyFile+"="+keyFile)
	if _, err := os.Stat(filepath.Join(data, "secrets.key")); !os.IsNotExist(err) {
		t.Fatalf("init wrote a key file although one was configured: %v", err)
	}
	d := startDaemon(t, e, data)
	mustAz(t, e, "folder", "add", "corp")
	if _, stderr, err := azIn(t, e, "value-v1", "secret", "set", "corp", "K"); err != nil {
		t.Fatalf("secret through the daemon at %s: %v %s", d.url, err, stderr)
	}
}

// serveRefusal runs `arizuko serve` expecting it to refuse; a daemon that
// starts instead is stopped and fails the test.
func serveRefusal(t *testing.T, e []string) (string, error) {
	t.Helper()
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = e
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		return out.String(), err
	case <-time.After(time.Minute):
		cmd.Process.Kill()
		<-done
		t.Fatalf("daemon started instead of refusing:\n%s", out.String())
		return "", nil
	}
}
