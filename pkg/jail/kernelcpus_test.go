package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestMaxCPUsMatchesFragment: the limit makePlan enforces is the minimal kernel's.
func TestMaxCPUsMatchesFragment(t *testing.T) {
	b, err := os.ReadFile("../../guestfs/kernel/config.fragment")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CONFIG_NR_CPUS="); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	if n != MaxCPUs {
		t.Fatalf("config.fragment has CONFIG_NR_CPUS=%d, MaxCPUs is %d: change both", n, MaxCPUs)
	}
	if _, err := makePlan(Spec{Argv: []string{"true"}, CPUs: MaxCPUs + 1}, FS9P); !errors.Is(err, ErrBadSpec) {
		t.Fatalf("cpus %d: err %v, want ErrBadSpec", MaxCPUs+1, err)
	}
}

// TestCheckKernelCPUs: more vCPUs than the kernel's NR_CPUS are refused, read from the
// config build.sh and debian.sh leave beside the image.
func TestCheckKernelCPUs(t *testing.T) {
	dir := t.TempDir()
	write := func(p, body string) string {
		t.Helper()
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	built := write(filepath.Join(dir, "kernel-abc", "vmlinux"), "elf")
	write(filepath.Join(dir, "kernel-abc", "config"), "CONFIG_SMP=y\nCONFIG_NR_CPUS=8\n")
	deb := filepath.Join(dir, "debian-6.1")
	debVmlinux := write(filepath.Join(deb, "vmlinux"), "elf")
	debBz := write(filepath.Join(deb, "boot", "vmlinuz-6.1.0-57-cloud-amd64"), "bz")
	write(filepath.Join(deb, "boot", "config-6.1.0-57-cloud-amd64"), "CONFIG_NR_CPUS=8192\n")
	bare := write(filepath.Join(dir, "system", "vmlinux"), "elf")
	cases := []struct {
		kernel string
		cpus   int
		ok     bool
	}{
		{built, 8, true},
		{built, 9, false},
		{debVmlinux, 64, true},
		{debBz, 64, true},
		{bare, 64, true}, // no config: only MaxCPUs applies (makePlan)
	}
	for _, c := range cases {
		err := checkKernelCPUs(c.kernel, c.cpus)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadSpec)) {
			t.Errorf("checkKernelCPUs(%s, %d) = %v, want ok %v", c.kernel, c.cpus, err, c.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "at most 8") {
			t.Errorf("error %q does not name the limit", err)
		}
	}
}
