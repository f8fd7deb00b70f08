// Package testreq is the one rule for a test whose machine lacks something it needs (root,
// QEMU, a kernel, /dev/net/tun, a binary): it skips on a developer's machine and fails under
// `make test`, which sets CRACKBOX_TEST_REQUIRE=all, so CI cannot go green having tested none
// of the boundaries it exists to test.
package testreq

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
)

// Switch is the environment variable `make test` sets to "all".
const Switch = "CRACKBOX_TEST_REQUIRE"

// Strict reports whether a missing prerequisite fails the test instead of skipping it.
func Strict() bool { return os.Getenv(Switch) == "all" }

// Missing stops t because what is missing; fix says how to get it.
func Missing(t testing.TB, what, fix string) {
	t.Helper()
	switch v := os.Getenv(Switch); v {
	case "all":
		t.Fatalf("missing %s: %s (%s=all: a test may not skip)", what, fix, Switch)
	case "":
		t.Skipf("missing %s: %s (skipped; %s=all makes this a failure)", what, fix, Switch)
	default:
		t.Fatalf("%s=%q: want \"all\" or unset (while checking for %s)", Switch, v, what)
	}
}

// Check stops t through Missing when err (a prerequisite probe's result) is non-nil.
func Check(t testing.TB, err error, what, fix string) {
	t.Helper()
	if err != nil {
		Missing(t, what, fmt.Sprintf("%v; %s", err, fix))
	}
}

// Root requires euid 0; why says what the test does with it.
func Root(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "root", "run as root (sudo make test): "+why)
	}
}

// Command requires name in PATH, installed by the Debian package pkg, and returns its path.
func Command(t testing.TB, name, pkg string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Missing(t, name, fmt.Sprintf("apt-get install %s (make deps installs it)", pkg))
	}
	return p
}

// File requires path to exist; fix says how to create it.
func File(t testing.TB, path, fix string) {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Missing(t, path, fix)
	}
}
