package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// denied are the syscalls the default guest kernel may answer with ENOSYS, and why
// (config.fragment has the matching lines). The list is exact: a syscall that works
// must leave it, so it never hides a regression.
var denied = map[string]string{
	"init_module":             "MODULES is off: everything is built in",
	"finit_module":            "MODULES is off: everything is built in",
	"delete_module":           "MODULES is off: everything is built in",
	"kexec_load":              "KEXEC is off: a guest never boots another kernel",
	"kexec_file_load":         "KEXEC_FILE is off: a guest never boots another kernel",
	"iopl":                    "X86_IOPL_IOPERM is off: port I/O for hardware a guest lacks",
	"ioperm":                  "X86_IOPL_IOPERM is off: port I/O for hardware a guest lacks",
	"mbind":                   "NUMA is off: a guest has one node",
	"get_mempolicy":           "NUMA is off: a guest has one node",
	"set_mempolicy":           "NUMA is off: a guest has one node",
	"migrate_pages":           "NUMA is off: a guest has one node",
	"move_pages":              "NUMA is off: a guest has one node",
	"set_mempolicy_home_node": "NUMA is off: a guest has one node",
	"quotactl":                "QUOTA is off: 9p, virtio-fs and tmpfs carry no quotas",
	"quotactl_fd":             "QUOTA is off: 9p, virtio-fs and tmpfs carry no quotas",
	"lookup_dcookie":          "removed from Linux with oprofile: ENOSYS on every 6.1 kernel",
	"memfd_secret":            "6.1 keeps it off unless booted with secretmem.enable=1, Debian's kernel too",
}

// TestGuestSyscalls boots the default kernel once and runs the probe: every syscall of
// the x86_64 table must be there unless denied says why not. The same guest reports
// its CPU, which under TCG must be QEMU's richest model.
func TestGuestSyscalls(t *testing.T) {
	jailtest.Require(t)
	if testing.Short() {
		t.Skip("boots a guest; skipped in -short")
	}
	dir := t.TempDir()
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "probe")
	build := exec.Command("go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build probe: %v\n%s", err, out)
	}
	s := jailtest.Spec(t, "sh", "-c", `./probe 2>probe.err || { echo "probe failed: $?"; tail -3 probe.err; }
echo "cpuflags $(grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2)"`)
	s.Workdir, s.Root = dir, true
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("guest: exit %d, err %v\nstdout:\n%s\nstderr:\n%s", res.Exit, err, out.String(), errb.String())
	}

	results := map[string]string{}
	var missing, flags []string
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) > 0 && f[0] == "ENOSYS":
			missing = f[1:]
		case len(f) > 0 && f[0] == "cpuflags":
			flags = f[1:]
		case len(f) > 0 && f[0] == "probe":
			t.Fatalf("%s", out.String())
		case len(f) == 3:
			results[f[1]] = f[2]
		}
	}
	calls, err := calls()
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != len(calls) {
		t.Fatalf("the probe reported %d calls, want %d:\n%s", len(results), len(calls), out.String())
	}
	// The probe can tell: a number with no syscall behind it is ENOSYS.
	if r := results["unassigned_335"]; r != "ENOSYS" {
		t.Fatalf("syscall 335 gave %q, want ENOSYS: the probe cannot see missing syscalls", r)
	}
	gone := map[string]bool{}
	for _, name := range missing {
		gone[name] = true
		if name == "unassigned_335" {
			continue
		}
		if why, ok := denied[name]; !ok {
			t.Errorf("%s: ENOSYS in the default guest kernel; enable it in guestfs/kernel/config.fragment (or deny it here with a reason)", name)
		} else {
			t.Logf("%s: ENOSYS as denied (%s)", name, why)
		}
	}
	for name := range denied {
		if !gone[name] {
			t.Errorf("%s is denied but answered %s: take it off the deny list", name, results[name])
		}
	}

	if res.Accel == jail.AccelTCG {
		have := map[string]bool{}
		for _, f := range flags {
			have[f] = true
		}
		for _, want := range []string{"sse4_2", "popcnt", "avx", "avx2", "bmi2", "fma"} {
			if !have[want] {
				t.Errorf("guest CPU under TCG lacks %s (flags: %v): x86-64-v3 binaries would die with SIGILL", want, flags)
			}
		}
	}
}
