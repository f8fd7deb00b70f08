package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "arizuko-bin")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "arizuko")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build arizuko:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a clean environment for the binary: no inherited ARIZUKO_* values.
func env(t *testing.T, data string, extra ...string) []string {
	out := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ARIZUKO_DATA=" + data}
	return append(out, extra...)
}

func az(t *testing.T, e []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = e
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return out.String(), errb.String(), err
}

func mustAz(t *testing.T, e []string, args ...string) string {
	t.Helper()
	out, errs, err := az(t, e, args...)
	if err != nil {
		t.Fatalf("arizuko %s: %v\n%s", strings.Join(args, " "), err, errs)
	}
	return out
}

type daemon struct {
	cmd  *exec.Cmd
	url  string
	logs *nettest.Buffer // written by the daemon's output copiers while a test reads it
}

// startDaemon runs `arizuko serve` (with extra flags) on a free port and waits for /health.
func startDaemon(t *testing.T, e []string, data string, extra ...string) *daemon {
	t.Helper()
	os.Remove(filepath.Join(data, daemonFile))
	d := &daemon{cmd: exec.Command(binary, append([]string{"serve", "--listen", "127.0.0.1:0"}, extra...)...), logs: &nettest.Buffer{}}
	d.cmd.Env = e
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.cmd.Process.Kill(); d.cmd.Wait() })
	if !eventually.Within(30*time.Second, func() bool {
		var info daemonInfo
		if b, err := os.ReadFile(filepath.Join(data, daemonFile)); err != nil || json.Unmarshal(b, &info) != nil || info.URL == "" {
			return false
		}
		resp, err := http.Get(info.URL + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		d.url = info.URL
		return true
	}) {
		t.Fatalf("daemon did not come up:\n%s", d.logs)
	}
	return d
}

func initData(t *testing.T, extra ...string) (string, []string) {
	data := filepath.Join(t.TempDir(), "data")
	e := env(t, data, extra...)
	mustAz(t, e, "init")
	return data, e
}

// TestCrashLosesNoAcknowledgedMessage posts messages from several clients,
// SIGKILLs the daemon right after one of them is acknowledged, and checks
// that every message that got a 2xx is in the database after a restart.
func TestCrashLosesNoAcknowledgedMessage(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	token := strings.TrimSpace(readFile(t, filepath.Join(data, "token")))
	d := startDaemon(t, e, data)

	var mu sync.Mutex
	acked := map[int64]string{}
	killAt := 40
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; ; i++ {
				text := fmt.Sprintf("w%d-%d", w, i)
				body := fmt.Sprintf(`{"chat_jid":"web:corp","sender":"w%d","text":%q}`, w, text)
				req, _ := http.NewRequest("POST", d.url+"/v1/messages", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+token)
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					return // the daemon is gone
				}
				var in service.Ingest
				json.NewDecoder(resp.Body).Decode(&in)
				resp.Body.Close()
				if resp.StatusCode != http.StatusCreated {
					t.Errorf("status %d", resp.StatusCode)
					return
				}
				mu.Lock()
				acked[in.Message.ID] = text
				n := len(acked)
				mu.Unlock()
				if n >= killAt {
					once.Do(func() { d.cmd.Process.Signal(syscall.SIGKILL) })
				}
			}
		}(w)
	}
	wg.Wait()
	d.cmd.Wait()
	if len(acked) < killAt {
		t.Fatalf("only %d acknowledged", len(acked))
	}

	// The CLI opens the data dir directly now that the daemon is dead.
	out := mustAz(t, e, "--json", "messages", "web:corp", "--limit", "1000")
	var stored []store.Message
	if err := json.Unmarshal([]byte(out), &stored); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	have := map[int64]string{}
	for _, m := range stored {
		have[m.ID] = m.Text
	}
	for id, text := range acked {
		if have[id] != text {
			t.Errorf("acknowledged message %d %q lost (have %q)", id, text, have[id])
		}
	}
	// And the restarted daemon serves the same rows.
	d2 := startDaemon(t, e, data)
	out = mustAz(t, e, "--json", "messages", "web:corp", "--limit", "1000")
	if err := json.Unmarshal([]byte(out), &stored); err != nil || len(stored) < len(acked) {
		t.Fatalf("after restart %d stored, %d acked: %v", len(stored), len(acked), err)
	}
	d2.cmd.Process.Signal(syscall.SIGTERM)
	d2.cmd.Wait()
	t.Logf("acknowledged %d, stored %d", len(acked), len(stored))
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestServeRefusesWithoutKey(t *testing.T) {
	key := secrets.GenerateKey()
	data, _ := initData(t, "ARIZUKO_SECRETS_KEY="+key)
	if _, err := os.Stat(filepath.Join(data, "secrets.key")); !os.IsNotExist(err) {
		t.Fatalf("init wrote a key file although a key was configured: %v", err)
	}
	cmd := exec.Command(binary, "serve", "--listen", "127.0.0.1:0")
	cmd.Env = env(t, data)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	done := make(chan error, 1)
	cmd.Start()
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(out.String(), "refusing to start") || !strings.Contains(out.String(), "no secrets key") {
			t.Fatalf("err=%v output=%s", err, out.String())
		}
	case <-time.After(20 * time.Second):
		cmd.Process.Kill()
		t.Fatal("daemon started without a key")
	}
	// A malformed key is refused too.
	_, errs, err := az(t, env(t, data, "ARIZUKO_SECRETS_KEY=short"), "serve", "--listen", "127.0.0.1:0")
	if err == nil || !strings.Contains(errs, "invalid secrets key") {
		t.Fatalf("bad key: %v %s", err, errs)
	}
}

// TestSecretRotate rotates through the CLI on the data dir and through a
// running daemon, then checks the values open under the new key alone.
func TestSecretRotate(t *testing.T) {
	data, e := initData(t)
	keyFile := filepath.Join(data, "secrets.key")
	k1 := strings.TrimSpace(readFile(t, keyFile))
	mustAz(t, e, "folder", "add", "corp")
	if _, stderr, err := azIn(t, e, "value-v1", "secret", "set", "corp", "TOKEN"); err != nil {
		t.Fatal(stderr)
	}
	if out := mustAz(t, e, "secret", "ls"); !strings.Contains(out, "TOKEN") || strings.Contains(out, "value-v1") {
		t.Fatalf("ls: %s", out)
	}
	k2, k3 := secrets.GenerateKey(), secrets.GenerateKey()
	os.WriteFile(keyFile, []byte(k2+"\n"+k1+"\n"), 0o600)
	if out := mustAz(t, e, "secret", "rotate"); !strings.Contains(out, "resealed 1") {
		t.Fatalf("rotate: %s", out)
	}
	if _, stderr, err := azIn(t, e, "value-v2", "secret", "set", "corp", "OTHER"); err != nil {
		t.Fatal(stderr)
	}

	os.WriteFile(keyFile, []byte(k3+"\n"+k2+"\n"), 0o600)
	d := startDaemon(t, e, data)
	if out := mustAz(t, e, "secret", "rotate"); !strings.Contains(out, "resealed 2") {
		t.Fatalf("rotate via daemon: %s\n%s", out, d.logs)
	}
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()

	raw, _ := secrets.ParseKeys(k3)
	ring, _ := secrets.NewRing(raw...)
	l, err := service.Open(context.Background(), service.Options{DataDir: data, Ring: ring})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	got, err := l.FolderSecrets(context.Background(), "corp")
	if err != nil || got["TOKEN"] != "value-v1" || got["OTHER"] != "value-v2" {
		t.Fatalf("after rotation: %v %v", got, err)
	}
}

// TestCLIModes runs the same commands on the data dir and against the daemon.
func TestCLIModes(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	mustAz(t, e, "route", "add", "--seq", "5", "--match", "platform=tg", "--target", "corp#main")
	direct := mustAz(t, e, "resolve", "tg:1", "--platform", "tg")
	d := startDaemon(t, e, data)
	viaDaemon := mustAz(t, e, "resolve", "tg:1", "--platform", "tg")
	viaFlag := mustAz(t, env(t, "/nonexistent", "ARIZUKO_TOKEN="+strings.TrimSpace(readFile(t, filepath.Join(data, "token")))), "--server", d.url, "resolve", "tg:1", "--platform", "tg")
	if direct != viaDaemon || direct != viaFlag || !strings.Contains(direct, "corp#main") {
		t.Fatalf("direct %q, daemon %q, --server %q", direct, viaDaemon, viaFlag)
	}
	_, errs, err := az(t, e, "folder", "add", "corp/../../etc")
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 || !strings.Contains(errs, `".."`) {
		t.Fatalf("bad folder via daemon: %v %s", err, errs)
	}
	_, errs, err = az(t, env(t, data, "ARIZUKO_TOKEN=wrong-token"), "folder", "ls")
	if err == nil || !strings.Contains(errs, "bearer token") {
		t.Fatalf("wrong token: %v %s", err, errs)
	}
}
