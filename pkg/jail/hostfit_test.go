package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckHostFit: a guest asking for more vCPUs than the host has, or more memory than
// it has available, is refused before anything starts, with the host's figure as the fix.
func TestCheckHostFit(t *testing.T) {
	meminfo := filepath.Join(t.TempDir(), "meminfo")
	if err := os.WriteFile(meminfo, []byte("MemTotal:        4096000 kB\nMemFree:          100000 kB\nMemAvailable:    1048576 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	oldMem, oldCPUs := hostMemInfo, hostCPUs
	hostMemInfo, hostCPUs = meminfo, func() int { return 2 }
	t.Cleanup(func() { hostMemInfo, hostCPUs = oldMem, oldCPUs })
	tests := []struct {
		name         string
		cpus, memMiB int
		want         string // "" = fits
	}{
		{"fits", 2, 1024, ""},
		{"too many cpus", 3, 512, "this host has 2 CPUs; give the guest 2 or fewer (--cpus)"},
		{"too much memory", 1, 1025, "this host has 1024 MiB available; give the guest 1024M or less (--memory)"},
	}
	for _, tc := range tests {
		err := checkHostFit(tc.cpus, tc.memMiB)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want ErrBadSpec naming %q", tc.name, err, tc.want)
		}
	}
	// The check is part of planning, so a run is refused before it boots.
	if _, err := makePlan(Spec{Argv: []string{"true"}, CPUs: 3}, FS9P); err == nil || !strings.Contains(err.Error(), "2 CPUs") {
		t.Fatalf("makePlan with 3 vCPUs on 2 CPUs: %v", err)
	}
}

// TestCheckMaskedTargets: a share whose guest path a secret mask covers is refused
// (the mask would hide it); one beside a mask is not.
func TestCheckMaskedTargets(t *testing.T) {
	masks := []string{"/etc/ssl/private", "/etc/shadow"}
	tests := []struct {
		name    string
		shares  []share
		workdir string
		want    string
	}{
		{"volume under a mask", []share{{Target: "/etc/ssl/private/keys"}}, "", "volume target /etc/ssl/private/keys is under /etc/ssl/private"},
		{"volume on a mask", []share{{Target: "/etc/shadow"}}, "", "mount it elsewhere"},
		{"workdir under a mask", []share{{Target: "/etc/ssl/private/x"}}, "/etc/ssl/private/x", "workdir /etc/ssl/private/x is under /etc/ssl/private"},
		{"beside a mask", []share{{Target: "/etc/ssl/certs"}, {Target: "/etc/shadowy"}}, "", ""},
	}
	for _, tc := range tests {
		err := checkMaskedTargets(tc.shares, masks, tc.workdir)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (!errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err %v, want ErrBadSpec naming %q", tc.name, err, tc.want)
		}
	}
}
