package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// TestGCRemovesKilledRunDir: crackbox gc removes the run dir of a run whose
// crackbox was killed before its QEMU started, which no run's sweep takes,
// and leaves a crash report alone.
func TestGCRemovesKilledRunDir(t *testing.T) {
	testreq.Root(t, "gc removes taps and nftables tables")
	base := t.TempDir()
	t.Setenv(rundir.BaseEnv, base)
	dead := filepath.Join(base, "0123456789ab")
	os.MkdirAll(filepath.Join(dead, "vm"), 0o700)
	os.WriteFile(filepath.Join(dead, "owner.lock"), nil, 0o600)
	old := time.Now().Add(-time.Hour)
	os.Chtimes(filepath.Join(dead, "owner.lock"), old, old)
	report := filepath.Join(base, "ba9876543210")
	os.MkdirAll(report, 0o700)
	os.WriteFile(filepath.Join(report, "console.log"), []byte("Kernel panic"), 0o600)
	var out bytes.Buffer
	if err := runGC(&out); err != nil {
		t.Fatalf("gc: %v (%s)", err, out.String())
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("the killed run's dir survived gc: %v", err)
	}
	if !strings.Contains(out.String(), "removed run dir "+dead) {
		t.Errorf("gc output %q does not name the run dir", out.String())
	}
	if _, err := os.Stat(filepath.Join(report, "console.log")); err != nil {
		t.Errorf("gc removed a crash report: %v", err)
	}
}
