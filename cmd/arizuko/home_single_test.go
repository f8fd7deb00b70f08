package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// On one host the home is <data>/homes/<folder>: push makes it a copy of a
// directory (without a daemon, and through one), pull copies it out, and the
// history commands say they need fleet mode.
func TestHomeSingleHost(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "demo", "--agent", "python3 /home/node/agent.py")
	home := filepath.Join(data, "homes", "demo")
	os.MkdirAll(home, 0o750)
	os.WriteFile(filepath.Join(home, "stale"), []byte("old"), 0o644)
	seed := seedDir(t, map[string]string{"agent.py": "print('hi')\n", "mem/notes.md": "remember"})
	mustAz(t, e, "home", "push", "demo", seed)
	if b, _ := os.ReadFile(filepath.Join(home, "agent.py")); string(b) != "print('hi')\n" {
		t.Errorf("home after push: agent.py %q", b)
	}
	if _, err := os.Stat(filepath.Join(home, "stale")); err == nil {
		t.Errorf("push kept a file the pushed directory lacks")
	}
	if _, errs, err := az(t, e, "home", "log", "demo"); err == nil || !strings.Contains(errs, "fleet mode") {
		t.Errorf("home log on one host: %v %s", err, errs)
	}
	// Through the daemon.
	startDaemon(t, e, data)
	mustAz(t, e, "home", "push", "demo", seedDir(t, map[string]string{"agent.py": "print('v2')\n"}))
	out := filepath.Join(t.TempDir(), "out")
	mustAz(t, e, "home", "pull", "demo", out)
	if b, _ := os.ReadFile(filepath.Join(out, "agent.py")); string(b) != "print('v2')\n" {
		t.Errorf("pulled agent.py %q", b)
	}
	if _, err := os.Stat(filepath.Join(out, "mem")); err == nil {
		t.Errorf("pull holds mem/ the second push removed")
	}
	if _, errs, err := az(t, e, "home", "pull", "demo", out); err == nil || !strings.Contains(errs, "not empty") {
		t.Errorf("pull into a non-empty dir: %v %s", err, errs)
	}
	if _, errs, err := az(t, e, "home", "restore", "demo", "--version", "1"); err == nil || !strings.Contains(errs, "fleet mode") {
		t.Errorf("home restore on one host: %v %s", err, errs)
	}
}
