package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
)

// lastLine is the count line CI reads.
func lastLine(out string) string {
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return lines[len(lines)-1]
}

// goTest runs testsum over `go test -json args` in dir.
func goTest(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command("go", append(append([]string{"test", "-json", "-count=1"}, raceFlag...), args...)...)
	cmd.Dir = dir
	var out, errb bytes.Buffer
	code := run(cmd, &out, &errb)
	t.Logf("exit %d\n%s%s", code, out.String(), errb.String())
	return code, out.String() + errb.String()
}

// module writes a throwaway Go module holding the given test file.
func module(t *testing.T, test string) string {
	dir := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module example.test/m\n\ngo 1.22\n", "m_test.go": test} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const mixed = `package m

import "testing"

func TestPass(t *testing.T) { t.Run("sub", func(t *testing.T) {}) }
func TestFail(t *testing.T) { t.Fatal("the failure text") }
func TestSkip(t *testing.T) { t.Skip("the skip reason") }
`

func TestCountsPassFailSkip(t *testing.T) {
	t.Setenv(testreq.Switch, "")
	code, out := goTest(t, module(t, mixed), ".")
	if code == 0 || lastLine(out) != "2 passed, 1 failed, 1 skipped" {
		t.Fatalf("exit %d, last line %q: want non-zero and 2 passed, 1 failed, 1 skipped", code, lastLine(out))
	}
	for _, want := range []string{"the failure text", "testsum: skipped example.test/m TestSkip: m_test.go:7: the skip reason"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func TestSkipFailsOnlyUnderTheSwitch(t *testing.T) {
	dir := module(t, "package m\n\nimport \"testing\"\n\nfunc TestA(t *testing.T) {}\nfunc TestB(t *testing.T) { t.Skip(\"no\") }\n")
	for _, c := range []struct {
		sw   string
		fail bool
	}{{"", false}, {"all", true}} {
		t.Setenv(testreq.Switch, c.sw)
		code, out := goTest(t, dir, ".")
		if (code != 0) != c.fail || lastLine(out) != "1 passed, 0 failed, 1 skipped" {
			t.Errorf("%s=%q: exit %d, last line %q", testreq.Switch, c.sw, code, lastLine(out))
		}
	}
}

func TestBuildFailureCounts(t *testing.T) {
	code, out := goTest(t, module(t, "package m\n\nfunc TestX(t *testing.T) { undefined() }\n"), ".")
	if code == 0 || lastLine(out) != "0 passed, 1 failed, 0 skipped" || !strings.Contains(out, "undefined") {
		t.Fatalf("exit %d, last line %q: want the build failure counted", code, lastLine(out))
	}
}

// repoRoot is the module this package lives in.
func repoRoot(t *testing.T) string {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(strings.TrimSpace(string(out)))
}

// A guest test on a machine without a kernel: a skip on a laptop, a failure naming the
// fix under make test's switch.
func TestVMPackageWithoutKernel(t *testing.T) {
	t.Setenv("CRACKBOX_KERNEL", "")
	t.Setenv("CRACKBOX_CACHE", t.TempDir())
	want := "missing guest kernel: set CRACKBOX_KERNEL or run `make kernel`"
	if os.Geteuid() != 0 {
		want = "missing root"
	}
	for _, c := range []struct {
		sw, line string
		fail     bool
	}{{"all", "0 passed, 1 failed, 0 skipped", true}, {"", "0 passed, 0 failed, 1 skipped", false}} {
		t.Setenv(testreq.Switch, c.sw)
		code, out := goTest(t, repoRoot(t), "-run=^TestGuestBoots$", "./internal/jailtest")
		if (code != 0) != c.fail || lastLine(out) != c.line || !strings.Contains(out, want) {
			t.Errorf("%s=%q: exit %d, last line %q: want %q and %q in the output", testreq.Switch, c.sw, code, lastLine(out), c.line, want)
		}
	}
}

// A tap test on a machine without /dev/net/tun (hidden here under a tmpfs in a private
// mount namespace) fails under the switch, naming the device.
func TestTapPackageWithoutTun(t *testing.T) {
	testreq.Root(t, "hides /dev/net/tun in a private mount namespace")
	t.Setenv(testreq.Switch, "all")
	args := append(append([]string{"test", "-json", "-count=1"}, raceFlag...), "-run=^TestSetupBuildsTapAndTableAndCloseRemovesThem$", "./pkg/jail/netjail")
	cmd := exec.Command("sh", append([]string{"-c", `mount -t tmpfs tmpfs /dev/net && exec go "$@"`, "sh"}, args...)...)
	cmd.Dir = repoRoot(t)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private
	var out, errb bytes.Buffer                                                // two buffers: the stderr copy may not race the summary's writes
	code := run(cmd, &out, &errb)
	t.Logf("exit %d\n%s%s", code, out.String(), errb.String())
	if code == 0 || lastLine(out.String()) != "0 passed, 1 failed, 0 skipped" || !strings.Contains(out.String(), "missing tap networking") ||
		!strings.Contains(out.String(), "/dev/net/tun") {
		t.Fatalf("exit %d, last line %q: want a failure naming /dev/net/tun", code, lastLine(out.String()))
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Fatalf("the host's /dev/net/tun is gone after the test: %v", err)
	}
}
