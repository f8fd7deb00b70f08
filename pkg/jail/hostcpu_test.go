package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeCPUInfo is /proc/cpuinfo of a two-processor host; edit replaces one line of the
// first processor.
func fakeCPUInfo(edit map[string]string) string {
	proc := []struct{ k, v string }{
		{"processor", "0"}, {"vendor_id", "GenuineIntel"}, {"cpu family", "6"}, {"model", "85"},
		{"model name", "Intel(R) Xeon(R) Gold 6148 CPU @ 2.40GHz"}, {"stepping", "4"},
		{"microcode", "0x2006e05"}, {"cpu MHz", "2394.374"}, {"cache size", "28160 KB"},
		{"flags", "fpu vme de pse tsc msr pae sse4_2 popcnt avx avx2 avx512f vmx"},
		{"bogomips", "4788.74"},
	}
	var b strings.Builder
	for i := 0; i < 2; i++ {
		for _, kv := range proc {
			v := kv.v
			if e, ok := edit[kv.k]; ok && i == 0 {
				v = e
			}
			if kv.k == "processor" && i == 1 {
				v = "1"
			}
			if v != "\x00" { // "\x00" drops the line
				b.WriteString(kv.k + "\t: " + v + "\n")
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// TestSnapHost: under KVM the key part follows the host CPU and kernel and nothing
// else; under TCG it is the emulated model whatever the host.
func TestSnapHost(t *testing.T) {
	dir := t.TempDir()
	info, rel := filepath.Join(dir, "cpuinfo"), filepath.Join(dir, "osrelease")
	oldInfo, oldRel := hostCPUInfo, hostOSRelease
	hostCPUInfo, hostOSRelease = info, rel
	t.Cleanup(func() { hostCPUInfo, hostOSRelease = oldInfo, oldRel })
	host := func(t *testing.T, accel string, edit map[string]string, release string) string {
		t.Helper()
		if err := os.WriteFile(info, []byte(fakeCPUInfo(edit)), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(rel, []byte(release+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		h, err := snapHost(accel)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	base := host(t, AccelKVM, nil, "6.1.0-28-amd64")
	for _, want := range []string{"cpu host", "GenuineIntel", "stepping: 4", "microcode: 0x2006e05", "avx512f", "kernel 6.1.0-28-amd64"} {
		if !strings.Contains(base, want) {
			t.Errorf("kvm host part lacks %q:\n%s", want, base)
		}
	}
	changes := []struct {
		name    string
		edit    map[string]string
		release string
	}{
		{"vendor", map[string]string{"vendor_id": "AuthenticAMD"}, ""},
		{"family", map[string]string{"cpu family": "25"}, ""},
		{"model", map[string]string{"model": "106"}, ""},
		{"stepping", map[string]string{"stepping": "7"}, ""},
		{"microcode", map[string]string{"microcode": "0x2007006"}, ""},
		{"flags", map[string]string{"flags": "fpu vme de pse tsc msr pae sse4_2 popcnt avx avx2 vmx"}, ""},
		{"host kernel", nil, "6.12.0-1-amd64"},
	}
	for _, c := range changes {
		rel := c.release
		if rel == "" {
			rel = "6.1.0-28-amd64"
		}
		if host(t, AccelKVM, c.edit, rel) == base {
			t.Errorf("a different %s left the kvm host part unchanged", c.name)
		}
	}
	// The clock speed and the model's marketing name say nothing a restore depends on.
	if h := host(t, AccelKVM, map[string]string{"cpu MHz": "1200.000", "bogomips": "1.0"}, "6.1.0-28-amd64"); h != base {
		t.Errorf("cpu MHz changed the kvm host part")
	}
	// A hypervisor that hides the microcode revision still gets a key.
	if h := host(t, AccelKVM, map[string]string{"microcode": "\x00"}, "6.1.0-28-amd64"); h == base {
		t.Errorf("a missing microcode line gave the same key")
	}

	tcg := host(t, AccelTCG, nil, "6.1.0-28-amd64")
	if tcg != "cpu max" || host(t, AccelTCG, map[string]string{"model": "106"}, "6.12") != tcg {
		t.Errorf("tcg host part %q depends on the host", tcg)
	}

	if err := os.WriteFile(info, []byte("processor\t: 0\nvendor_id\t: GenuineIntel\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := snapHost(AccelKVM); err == nil || !strings.Contains(err.Error(), "cpu family") {
		t.Errorf("a cpuinfo without the model lines: err %v, want one naming the missing line", err)
	}
	os.Remove(info)
	if _, err := snapHost(AccelKVM); err == nil {
		t.Error("no cpuinfo: no error")
	}
}
