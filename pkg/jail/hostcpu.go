package jail

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Where snapHost reads the host; tests point them at fakes.
var (
	hostCPUInfo   = "/proc/cpuinfo"
	hostOSRelease = "/proc/sys/kernel/osrelease"
)

// cpuIdentityFields are the /proc/cpuinfo lines that say which CPU a guest under
// `-cpu host` was booted on: a snapshot restored on another model, stepping or microcode
// either fails to load or runs on until it meets an instruction the new CPU lacks.
var cpuIdentityFields = []string{"vendor_id", "cpu family", "model", "stepping", "microcode", "flags"}

// snapHost is the host's part of a snapshot key. Under KVM the guest sees the host CPU
// and KVM's view of it depends on the host kernel, so both go into the key; a cache on a
// shared home or a cloned image then keeps one snapshot per host kind instead of
// restoring one host's snapshot on another. Under TCG the guest CPU is the emulated
// model, the same on every host, and the QEMU binary is already part of the key.
func snapHost(accel string) (string, error) {
	if accel != AccelKVM {
		return "cpu " + cpuModel(accel), nil
	}
	id, err := cpuIdentity(hostCPUInfo)
	if err != nil {
		return "", err
	}
	rel, err := os.ReadFile(hostOSRelease)
	if err != nil {
		return "", fmt.Errorf("host kernel release: %w", err)
	}
	return "cpu " + cpuModel(accel) + "\n" + id + "kernel " + strings.TrimSpace(string(rel)), nil
}

// cpuIdentity returns cpuIdentityFields of the first processor in a /proc/cpuinfo file,
// one "name: value" line each.
func cpuIdentity(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("host cpu: %w", err)
	}
	defer f.Close()
	got := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" && len(got) > 0 {
			break // the end of the first processor's block
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		k = strings.TrimSpace(k)
		if _, seen := got[k]; !seen {
			got[k] = strings.TrimSpace(v)
		}
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("host cpu: %s: %w", path, err)
	}
	var b strings.Builder
	for _, k := range cpuIdentityFields {
		v, ok := got[k]
		if !ok && k != "microcode" { // some hypervisors hide the microcode revision
			return "", fmt.Errorf("host cpu: %s has no %q line", path, k)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, v)
	}
	return b.String(), nil
}

// tscKHz is the host TSC frequency for tsc_early_khz=: under TCG on microvm the guest
// cannot calibrate its TSC and hangs without it.
func tscKHz() int {
	if b, err := os.ReadFile("/sys/devices/system/cpu/cpu0/tsc_freq_khz"); err == nil {
		if v, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && v > 0 {
			return v
		}
	}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			k, v, ok := strings.Cut(sc.Text(), ":")
			if ok && strings.TrimSpace(k) == "cpu MHz" {
				if mhz, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && mhz > 0 {
					return int(mhz * 1000)
				}
			}
		}
	}
	return 2000000
}
