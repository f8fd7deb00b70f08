package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/initramfs"
)

// modulesDirName is the directory guestfs/kernel/debian.sh writes beside a modular
// kernel (Debian's cloud kernel): the decompressed modules the guest needs and a file
// "order" listing them in load order. A kernel without it is taken to have everything
// built in (the minimal kernel).
const modulesDirName = "crackbox-modules"

// guestModulesDir is where the modules sit in the initramfs; guest-init loads them from
// there (guestfs/init/modules.go).
const guestModulesDir = "crackbox-modules"

// ErrModularNeedsRoot: a modular kernel has no 9p, so every share is virtio-fs, whose
// daemons crackbox starts only as root.
var ErrModularNeedsRoot = errors.New("jail: the Debian cloud kernel needs root")

// modKernel is a modular guest kernel's needs; nil means a kernel with everything built in.
type modKernel struct {
	dir  string
	mods []initramfs.File
}

// probeKernel looks for modulesDirName beside kernel (or beside its boot/ directory, for
// the bzImage debian.sh leaves in <dir>/boot/) and reads the modules it lists.
func probeKernel(kernel string) (*modKernel, error) {
	kdir := filepath.Dir(kernel)
	dirs := []string{kdir}
	if filepath.Base(kdir) == "boot" {
		dirs = append(dirs, filepath.Dir(kdir))
	}
	for _, d := range dirs {
		md := filepath.Join(d, modulesDirName)
		order, err := os.ReadFile(filepath.Join(md, "order"))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: kernel modules: %v", ErrNoKernel, err)
		}
		k := &modKernel{dir: md}
		var names []string
		for _, name := range strings.Fields(string(order)) {
			if name != filepath.Base(name) || !strings.HasSuffix(name, ".ko") {
				return nil, fmt.Errorf("%w: %s/order lists %q, want plain NAME.ko entries; rerun guestfs/kernel/debian.sh", ErrNoKernel, md, name)
			}
			data, err := os.ReadFile(filepath.Join(md, name))
			if err != nil {
				return nil, fmt.Errorf("%w: kernel module %s: %v; rerun guestfs/kernel/debian.sh", ErrNoKernel, name, err)
			}
			k.mods = append(k.mods, initramfs.File{Name: guestModulesDir + "/" + name, Perm: 0o644, Data: data})
			names = append(names, name)
		}
		if len(names) == 0 {
			return nil, fmt.Errorf("%w: %s/order lists no modules; rerun guestfs/kernel/debian.sh", ErrNoKernel, md)
		}
		k.mods = append(k.mods, initramfs.File{Name: guestModulesDir + "/order", Perm: 0o644,
			Data: []byte(strings.Join(names, "\n") + "\n")})
		return k, nil
	}
	return nil, nil
}

// adapt switches every share to virtio-fs (the cloud kernel has no 9p) and marks the plan
// modular. Only root can start the virtio-fs daemons.
func (k *modKernel) adapt(p *plan, euid int) error {
	if k == nil {
		return nil
	}
	if euid != 0 {
		return fmt.Errorf("%w: it has no 9p, so its shares are served by virtiofsd, which crackbox starts only as root; run crackbox with sudo, or use the minimal kernel (`make kernel`, no --kernel)", ErrModularNeedsRoot)
	}
	p.modular = true
	for i := range p.lowers {
		p.lowers[i].FS = FSVirtiofs
	}
	for i := range p.rs.Root.Lower {
		p.rs.Root.Lower[i].FSType = FSVirtiofs
	}
	// A changes stream is applied by a stream share's server, which virtio-fs shares do
	// not have: their workdir is live (virtio-fs is fast enough not to need the layer).
	for i := range p.userShare {
		p.userShare[i].FS = FSVirtiofs
		p.userShare[i].SyncExit = false
	}
	for i := range p.rs.Mounts {
		p.rs.Mounts[i].FSType = FSVirtiofs
		p.rs.Mounts[i].Sync, p.rs.Mounts[i].SyncLimit = "", 0
	}
	p.rs.Swap = swapSize(p.rs)
	return nil
}

// initramfs returns the cached initramfs: with the modules for a modular kernel.
func (k *modKernel) initramfs(guestInit, cache string) (string, error) {
	if k == nil {
		return ensureInitramfs(guestInit, cache)
	}
	return initramfs.EnsureExtra(guestInit, cache, k.mods)
}

// modularArgs adjusts QEMU's arguments for a modular kernel: microvm must describe its
// virtio-mmio devices in ACPI, since the cloud kernel ignores virtio_mmio.device= on the
// command line (CONFIG_VIRTIO_MMIO_CMDLINE_DEVICES is off). microvm's ACPI is hardware
// reduced, so Linux then skips the PIT and the local APIC timer is the guest's only clock
// event: nolapic_timer would leave it none, and a sleep that no other interrupt ends
// would never end.
func modularArgs(p *plan, args []string) []string {
	if !p.modular {
		return args
	}
	for i := 0; i+1 < len(args); i++ {
		switch {
		case args[i] == "-M" && strings.HasPrefix(args[i+1], "microvm"):
			args[i+1] = strings.Replace(args[i+1], "acpi=off", "acpi=on", 1)
		case args[i] == "-append":
			args[i+1] = strings.Join(slices.DeleteFunc(strings.Fields(args[i+1]), func(f string) bool {
				return f == "nolapic_timer"
			}), " ")
		}
	}
	return args
}
