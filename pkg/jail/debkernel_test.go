package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// fakeModularKernel lays out what guestfs/kernel/debian.sh leaves: <dir>/vmlinux,
// <dir>/boot/vmlinuz-X and <dir>/crackbox-modules/{order,*.ko}.
func fakeModularKernel(t *testing.T, order string, mods map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	md := filepath.Join(dir, modulesDirName)
	os.MkdirAll(md, 0o755)
	os.MkdirAll(filepath.Join(dir, "boot"), 0o755)
	os.WriteFile(filepath.Join(dir, "vmlinux"), []byte("\x7fELF"), 0o644)
	os.WriteFile(filepath.Join(dir, "boot", "vmlinuz-6.1.0-cloud-amd64"), []byte("bz"), 0o644)
	os.WriteFile(filepath.Join(md, "order"), []byte(order), 0o644)
	for n, d := range mods {
		os.WriteFile(filepath.Join(md, n), []byte(d), 0o644)
	}
	return dir
}

func TestProbeKernel(t *testing.T) {
	t.Run("minimal kernel needs nothing", func(t *testing.T) {
		dir := t.TempDir()
		k, err := probeKernel(filepath.Join(dir, "vmlinux"))
		if err != nil || k != nil {
			t.Fatalf("probe = %v, %v; want nil, nil", k, err)
		}
	})
	for _, img := range []string{"vmlinux", "boot/vmlinuz-6.1.0-cloud-amd64"} {
		t.Run("modules beside "+img, func(t *testing.T) {
			dir := fakeModularKernel(t, "virtio.ko\nfuse.ko\n", map[string]string{"virtio.ko": "V", "fuse.ko": "F"})
			k, err := probeKernel(filepath.Join(dir, img))
			if err != nil || k == nil {
				t.Fatalf("probe = %v, %v", k, err)
			}
			var names []string
			for _, f := range k.mods {
				names = append(names, f.Name+"="+string(f.Data))
			}
			want := "crackbox-modules/virtio.ko=V crackbox-modules/fuse.ko=F crackbox-modules/order=virtio.ko\nfuse.ko\n"
			if got := strings.Join(names, " "); got != want {
				t.Errorf("files %q, want %q", got, want)
			}
		})
	}
	bad := []struct{ name, order string }{
		{"path in order", "../etc/shadow.ko\n"},
		{"not a module", "order\n"},
		{"missing file", "gone.ko\n"},
		{"empty order", "\n"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			dir := fakeModularKernel(t, c.order, nil)
			if _, err := probeKernel(filepath.Join(dir, "vmlinux")); !errors.Is(err, ErrNoKernel) || !strings.Contains(err.Error(), "debian.sh") {
				t.Fatalf("err %v, want ErrNoKernel naming debian.sh", err)
			}
		})
	}
}

func TestModularAdapt(t *testing.T) {
	mk := &modKernel{}
	newPlan := func() *plan {
		p := &plan{
			lowers:    []share{{Tag: "usr", FS: FS9P}},
			userShare: []share{{Tag: "v0", FS: FS9P, SyncExit: true}},
		}
		p.rs.Root.Lower = []control.Mount{{Tag: "usr", FSType: FS9P}}
		p.rs.Mounts = []control.Mount{{Tag: "v0", FSType: FS9P, Sync: control.SyncExit, SyncLimit: 1 << 30}}
		p.rs.Swap = swapSize(p.rs)
		return p
	}
	p := newPlan()
	if err := mk.adapt(p, 1000); !errors.Is(err, ErrModularNeedsRoot) || !strings.Contains(err.Error(), "sudo") {
		t.Fatalf("non-root: %v, want ErrModularNeedsRoot naming sudo", err)
	}
	if err := mk.adapt(p, 0); err != nil {
		t.Fatal(err)
	}
	if !p.modular || p.lowers[0].FS != FSVirtiofs || p.userShare[0].FS != FSVirtiofs ||
		p.rs.Root.Lower[0].FSType != FSVirtiofs || p.rs.Mounts[0].FSType != FSVirtiofs {
		t.Fatalf("plan not switched to virtio-fs: %+v", p)
	}
	// No server applies a changes stream on virtio-fs: the workdir is live there.
	if p.userShare[0].SyncExit || p.rs.Mounts[0].Sync != "" || p.rs.Swap != 0 {
		t.Fatalf("virtio-fs workdir still synced at exit: %+v", p)
	}
	var none *modKernel
	p = newPlan()
	if err := none.adapt(p, 1000); err != nil || p.modular || p.lowers[0].FS != FS9P {
		t.Fatalf("minimal kernel changed the plan: %v %+v", err, p)
	}
}

func TestModularArgs(t *testing.T) {
	cfg := vmConfig{Machine: MachineMicrovm, Accel: AccelTCG, CPUs: 1, MemoryMiB: 256,
		Append: kernelCmdline(AccelTCG, MachineMicrovm, 2300000, false),
		Shares: []vmShare{{share: share{Tag: "usr", FS: FSVirtiofs}, Sock: "/s"}}}
	find := func(args []string, opt string) string {
		for i, a := range args {
			if a == opt {
				return args[i+1]
			}
		}
		return ""
	}
	p := &plan{}
	minimal := modularArgs(p, cfg.args())
	if m := find(minimal, "-M"); strings.Contains(m, "acpi=on") {
		t.Errorf("minimal kernel: -M %s", m)
	}
	// Its PIT is the clock event, which spares TCG the local APIC timer's calibration.
	if a := find(minimal, "-append"); !strings.Contains(a, "nolapic_timer") {
		t.Errorf("minimal kernel under TCG: -append %q, want nolapic_timer", a)
	}
	p.modular = true
	args := modularArgs(p, cfg.args())
	// The cloud kernel finds virtio-mmio devices only through ACPI.
	if m := find(args, "-M"); strings.Contains(m, "acpi=off") || !strings.Contains(m, "memory-backend=mem") {
		t.Errorf("modular kernel: -M %s, want ACPI on (the default) and the shared memory backend", m)
	}
	// With ACPI on, the local APIC timer is its only clock event.
	want := strings.Replace(find(minimal, "-append"), " nolapic_timer", "", 1)
	if a := find(args, "-append"); a != want {
		t.Errorf("modular kernel: -append %q, want %q", a, want)
	}
}
