package crackbox

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
)

// depsOf is what a make target's scripts/deps.sh calls would install: make -n lists
// them, and each runs again with --list, which names its packages and installs nothing.
func depsOf(t *testing.T, target string) []string {
	t.Helper()
	makeBin := testreq.Command(t, "make", "make")
	cmd := exec.Command(makeBin, "-n", target)
	// Under make test the parent make's flags are in the environment; this make is its own.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n %s: %v", target, err)
	}
	var pkgs []string
	calls := 0
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "sudo "))
		if !strings.HasPrefix(line, "scripts/deps.sh") {
			continue
		}
		calls++
		list, err := exec.Command("bash", "-c", line+" --list").Output()
		if err != nil {
			t.Fatalf("%s --list: %v", line, err)
		}
		pkgs = append(pkgs, strings.Fields(string(list))...)
	}
	if calls == 0 {
		t.Fatalf("make -n %s runs no scripts/deps.sh, so a fresh machine would lack what it needs:\n%s", target, out)
	}
	return pkgs
}

// TestDemoInstallsOnlyWhatRunningNeeds: make demo installs QEMU, the kernel build's tools
// and nftables, and none of the test suite's world (a browser, a database server, an
// agent from npm); make test installs both, each with one command on a fresh machine.
func TestDemoInstallsOnlyWhatRunningNeeds(t *testing.T) {
	running := []string{"qemu-system-x86", "linux-source-6.1", "build-essential", "flex", "bison", "nftables"}
	testOnly := []string{"chromium", "chromium-driver", "postgresql", "postfix", "dovecot-imapd", "nodejs", "npm", "npm:@anthropic-ai/claude-code"}
	demo, test := depsOf(t, "demo"), depsOf(t, "test")
	for _, p := range running {
		if !slices.Contains(demo, p) || !slices.Contains(test, p) {
			t.Errorf("%s: make demo installs it: %v, make test: %v", p, slices.Contains(demo, p), slices.Contains(test, p))
		}
	}
	for _, p := range testOnly {
		if slices.Contains(demo, p) {
			t.Errorf("make demo installs %s, which only the tests need", p)
		}
		if !slices.Contains(test, p) {
			t.Errorf("make test does not install %s, which its tests need", p)
		}
	}
}
