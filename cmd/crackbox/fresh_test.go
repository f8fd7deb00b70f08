package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
)

// freshDirs returns a run dir base and a cache dir that do not exist yet, under a
// parent QEMU (running as nobody) may traverse, as /run is after a reboot.
func freshDirs(t *testing.T) (base, cache string) {
	t.Helper()
	parent, err := os.MkdirTemp("", "crackbox-fresh-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(parent) })
	if err := os.Chmod(parent, 0o711); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(parent, "run"), filepath.Join(parent, "cache")
}

// freshScript fetches an allowed and a blocked name through the forward proxy,
// resolves through the jail's DNS and fetches through the transparent proxy (to
// a public address: the name resolves to the upstream's loopback address, which
// in the guest is its own).
const freshScript = `
code() { curl -sS -m 30 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null; }
echo "CHECK fwd_allowed $(code http://good.test/)"
echo "CHECK fwd_blocked $(code http://other.test/)"
echo "CHECK dns $(getent hosts good.test | cut -d' ' -f1)"
echo "CHECK trans_allowed $(code --noproxy '*' --resolve good.test:80:203.0.113.10 http://good.test/)"
`

// TestFreshHostTapRun is the first run on a machine that has never seen crackbox,
// exactly after a reboot: no run dir base, an empty cache (no initramfs, no
// snapshot), and other programs on every port the guest dials. The networked run
// comes first, so netjail creates the base; a second run then reuses it.
func TestFreshHostTapRun(t *testing.T) {
	jailtest.Require(t)
	requireTap(t)
	nettest.HoldGuestPorts(t)
	u := startUpstreams(t)
	cfg := writeRunConfig(t, u)
	base, cache := freshDirs(t)
	wd := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	slot(t)
	for i := range 2 {
		cmd := cliCmd(t, ctx, wd, "--config", cfg, "--net", "tap", "--allow", "good.test", "--", "sh", "-c", freshScript)
		cmd.Env = append(cmd.Env, "CRACKBOX_RUN_DIR="+base, "CRACKBOX_CACHE="+cache)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCode(cmd.Run())
		if code != 0 {
			t.Fatalf("run %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, code, stdout.String(), stderr.String())
		}
		got := parseChecks(stdout.String())
		for name, want := range map[string]string{
			"fwd_allowed": "200", "fwd_blocked": "403", "dns": u.ip, "trans_allowed": "200",
		} {
			if got[name] != want {
				t.Errorf("run %d: %s = %q, want %q\nstderr:\n%s", i+1, name, got[name], want, stderr.String())
			}
		}
		if !strings.Contains(stderr.String(), "other.test") {
			t.Errorf("run %d: no blocked summary naming other.test:\n%s", i+1, stderr.String())
		}
	}
	fi, err := os.Stat(base)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o711 {
		t.Errorf("run dir base mode %04o, want 0711", fi.Mode().Perm())
	}
}
