package main

import (
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestVersionFlag(t *testing.T) {
	out := mustAz(t, env(t, t.TempDir()), "--version")
	if !regexp.MustCompile(`^arizuko github\.com/crackbox/crackbox \S+ \(revision \S+.*go1\.\d+`).MatchString(out) {
		t.Errorf("arizuko --version = %q, want the module, its version, the revision and the Go version", out)
	}
}

// TestServeNotifiesSystemd: under Type=notify, arizuko serve reports READY=1 on
// $NOTIFY_SOCKET, and by then its API answers.
func TestServeNotifiesSystemd(t *testing.T) {
	data, e := initData(t)
	sock := filepath.Join(t.TempDir(), "notify.sock")
	ln, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	startDaemon(t, append(e, "NOTIFY_SOCKET="+sock), data)
	ln.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 256)
	n, err := ln.Read(buf)
	if err != nil || !strings.Contains(string(buf[:n]), "READY=1") {
		t.Fatalf("no READY=1 on NOTIFY_SOCKET: %q %v", buf[:n], err)
	}
}
