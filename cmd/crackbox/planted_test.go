package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPlantedSymlinksNotFollowed: a guest replaces .env (through a live
// workdir) and tok (through one synced at exit) in its workdir with symlinks to
// a host file outside every share; the operator's next runs naming them with
// --env-file and --secret =file: are refused before a guest boots, and the host
// file's text goes nowhere.
func TestPlantedSymlinksNotFollowed(t *testing.T) {
	wd := t.TempDir()
	hostOnly := filepath.Join(t.TempDir(), "shadow")
	const secretText = "host-only-password-5e1f"
	if err := os.WriteFile(hostOnly, []byte("PASSWORD="+secretText+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(wd, ".env"), []byte("A=1\n"), 0o644)
	os.WriteFile(filepath.Join(wd, "tok"), []byte("a-token-of-the-operator\n"), 0o600)

	slot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, p := range []struct{ mode, name string }{{"live", ".env"}, {"exit", "tok"}} {
		plant := cliCmd(t, ctx, wd, "--net", "none", "--workdir-sync", p.mode, "--", "ln", "-sf", hostOnly, p.name)
		var perr bytes.Buffer
		plant.Stderr = &perr
		if code := exitCode(plant.Run()); code != 0 {
			t.Fatalf("planting guest (%s): exit %d: %s", p.mode, code, perr.String())
		}
		if target, err := os.Readlink(filepath.Join(wd, p.name)); err != nil || target != hostOnly {
			t.Fatalf("the guest (%s) did not plant the symlink %s: %q %v", p.mode, p.name, target, err)
		}
	}
	for _, args := range [][]string{
		{"--net", "none", "--env-file", ".env", "--", "sh", "-c", "echo LEAK=$PASSWORD"},
		{"--allow", "api.test", "--secret", "API_KEY@api.test=file:tok", "--", "sh", "-c", "echo LEAK"},
	} {
		cmd := cliCmd(t, ctx, wd, args...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		code := exitCode(cmd.Run())
		if code != 125 || !strings.Contains(errb.String(), "symlink") {
			t.Errorf("%q: exit %d, stderr %q; want 125 and a symlink refusal", args, code, errb.String())
		}
		if strings.Contains(out.String()+errb.String(), secretText) || strings.Contains(out.String(), "LEAK") {
			t.Errorf("%q: the run went ahead with the host file: %q %q", args, out.String(), errb.String())
		}
	}
}

// TestCLIRefusesSymlinkedShare: a -v source or --workdir that passes through
// a symlink, which a guest may have planted in a directory it could write,
// is refused before a guest boots: the operator names the real directory.
func TestCLIRefusesSymlinkedShare(t *testing.T) {
	wd := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(wd, "data")); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"--net", "none", "-v", "data:/mnt/data", "--", "true"},
		{"--net", "none", "-v", "data:/mnt/data:ro", "--", "true"},
		{"--net", "none", "--workdir", filepath.Join(wd, "data"), "--", "true"},
	} {
		cmd := cliCmd(t, context.Background(), wd, args...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		if code := exitCode(cmd.Run()); code != 125 || !strings.Contains(errb.String(), "real directory") {
			t.Errorf("%q: exit %d stderr %q", args, code, errb.String())
		}
	}
}
