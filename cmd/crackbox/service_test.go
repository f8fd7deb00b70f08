package main

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// TestProxyServeUnderSystemd: the daemon tells systemd it is ready once its
// listeners are up (Type=notify), and SIGHUP reopens the decision log, so after
// logrotate moves the file the next decisions land in a fresh one.
func TestProxyServeUnderSystemd(t *testing.T) {
	bin := buildCrackbox(t)
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	}))
	t.Cleanup(upstream.Close)
	_, port, _ := net.SplitHostPort(upstream.Listener.Addr().String())

	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "crackbox.toml")
	writeConfig(t, cfgPath, "allowed.test:"+port)
	logPath := filepath.Join(dir, "decisions.jsonl")

	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notify.Close() })
	d := startDaemon(t, bin, append(cleanEnv(t), "NOTIFY_SOCKET="+filepath.Join(dir, "notify.sock")), "--config", cfgPath)
	notify.SetReadDeadline(time.Now().Add(60 * time.Second))
	buf := make([]byte, 256)
	n, err := notify.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "READY=1") {
		t.Fatalf("no READY=1 on NOTIFY_SOCKET: %q %v", buf[:n], err)
	}
	// Readiness comes after the listeners: the forward proxy answers now.
	fwd := d.waitLine(t, `msg="proxy serving" forward=(\S+)`, 1)[1]
	client := &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: fwd}), DisableKeepAlives: true,
	}, Timeout: 10 * time.Second}
	fetch := func() {
		t.Helper()
		resp, err := client.Get("http://allowed.test:" + port + "/")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	lines := func(path string) int {
		b, _ := os.ReadFile(path)
		return strings.Count(string(b), "\n")
	}
	waitLines := func(path string, want int) {
		t.Helper()
		if !eventually.Within(20*time.Second, func() bool { return lines(path) >= want }) {
			t.Fatalf("%s has %d lines, want %d", path, lines(path), want)
		}
	}
	fetch()
	waitLines(logPath, 1)

	// logrotate: move the file away, then SIGHUP.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := d.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	d.waitLine(t, `msg="config reloaded"`, 1)
	fetch()
	waitLines(logPath, 1)
	if n := lines(logPath + ".1"); n != 1 {
		t.Errorf("the rotated file got %d lines, want only the one from before SIGHUP", n)
	}
}
