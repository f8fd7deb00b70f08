// Package install finds what a run boots from on this host: the guest kernel, guest-init,
// QEMU and virtiofsd, in the caller's cache, next to the running binary, or where
// `make install` and the packages put them. Run, `crackbox doctor` and `crackbox setup`
// look through it, so they agree on what a run would use.
package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
)

// System-wide install locations.
const (
	SystemKernel    = "/usr/lib/crackbox/vmlinux"
	SystemGuestInit = "/usr/lib/crackbox/guest-init"
	// Virtiofsd is where Debian's QEMU ships virtiofsd.
	Virtiofsd = "/usr/lib/qemu/virtiofsd"
)

// What the lookups find missing; pkg/jail hands them on as its own sentinels.
var (
	ErrNoKernel    = errors.New("no guest kernel")
	ErrNoQEMU      = errors.New("qemu-system-x86_64 not found")
	ErrNoGuestInit = errors.New("no guest-init")
)

// CacheDir is the default cache of kernels, initramfs images and snapshots (the
// caller's setting, run.cache, comes first): $XDG_CACHE_HOME/crackbox, else
// ~/.cache/crackbox. Under sudo it uses root's own home, never the caller's (sudo may keep
// HOME and XDG_CACHE_HOME): a root run never loads a kernel from a directory an
// unprivileged user can write.
func CacheDir() string {
	if os.Geteuid() == 0 && os.Getenv("SUDO_UID") != "" {
		if u, err := user.LookupId("0"); err == nil && u.HomeDir != "" {
			return filepath.Join(u.HomeDir, ".cache", "crackbox")
		}
		return "/root/.cache/crackbox"
	}
	if d := os.Getenv("XDG_CACHE_HOME"); d != "" {
		return filepath.Join(d, "crackbox")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return filepath.Join(os.TempDir(), "crackbox-cache")
	}
	return filepath.Join(home, ".cache", "crackbox")
}

// FindKernel returns the guest kernel: explicit (run.kernel), else the newest
// cacheDir/kernel-*/vmlinux, else the installed one (InstalledFile), else SystemKernel.
func FindKernel(explicit, cacheDir string) (string, error) {
	if explicit != "" {
		if st, err := os.Stat(explicit); err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("%w: %s is not a file; build one with `make kernel`", ErrNoKernel, explicit)
		}
		if err := checkKernelImage(explicit); err != nil {
			return "", err
		}
		return explicit, nil
	}
	if p := newestKernel(cacheDir); p != "" {
		return p, nil
	}
	if p := InstalledFile("vmlinux"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(SystemKernel); err == nil {
		return SystemKernel, nil
	}
	return "", fmt.Errorf("%w: none in %s/kernel-*/vmlinux or %s; build one with `make kernel` or set CRACKBOX_KERNEL",
		ErrNoKernel, cacheDir, SystemKernel)
}

func newestKernel(cacheDir string) string {
	if cacheDir == "" {
		return ""
	}
	matches, _ := filepath.Glob(filepath.Join(cacheDir, "kernel-*", "vmlinux"))
	type cand struct {
		path string
		mod  int64
	}
	var cs []cand
	for _, m := range matches {
		if st, err := os.Stat(m); err == nil && st.Mode().IsRegular() {
			cs = append(cs, cand{m, st.ModTime().UnixNano()})
		}
	}
	if len(cs) == 0 {
		return ""
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].mod > cs[j].mod })
	return cs[0].path
}

// InstalledFile returns <prefix>/lib/crackbox/name for the prefix the running
// executable is installed in (<prefix>/bin/crackbox, as `make install` and the
// release tarball lay it out), or "" if there is no such regular file.
func InstalledFile(name string) string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	p := filepath.Join(filepath.Dir(filepath.Dir(exe)), "lib", "crackbox", name)
	if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
		return p
	}
	return ""
}

// FindGuestInit returns the guest-init binary: explicit (run.guest_init), else guest-init
// next to the running executable, else the installed one (InstalledFile), else
// SystemGuestInit.
func FindGuestInit(explicit string) (string, error) {
	if explicit != "" {
		if st, err := os.Stat(explicit); err != nil || !st.Mode().IsRegular() {
			return "", fmt.Errorf("%w: guest-init %s is not a file; build it with `make guest-init`", ErrNoGuestInit, explicit)
		}
		return explicit, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "guest-init")
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
			return p, nil
		}
	}
	if p := InstalledFile("guest-init"); p != "" {
		return p, nil
	}
	if _, err := os.Stat(SystemGuestInit); err == nil {
		return SystemGuestInit, nil
	}
	return "", fmt.Errorf("%w: guest-init not found next to crackbox, in ../lib/crackbox or at %s; build it with `make guest-init`, install with `make install`, or set CRACKBOX_GUEST_INIT",
		ErrNoGuestInit, SystemGuestInit)
}

// FindQEMU returns the path of qemu-system-x86_64.
func FindQEMU() (string, error) {
	p, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		return "", fmt.Errorf("%w: install it (Debian: apt-get install qemu-system-x86)", ErrNoQEMU)
	}
	return p, nil
}

// checkKernelImage accepts an ELF vmlinux (PVH entry) or a bzImage ("HdrS" at 0x202).
func checkKernelImage(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoKernel, err)
	}
	defer f.Close()
	b := make([]byte, 0x206)
	n, _ := io.ReadFull(f, b)
	if n >= 4 && string(b[:4]) == "\x7fELF" {
		return nil
	}
	if n == len(b) && string(b[0x202:0x206]) == "HdrS" {
		return nil
	}
	return fmt.Errorf("%w: %s is neither a vmlinux (ELF) nor a bzImage; build one with `make kernel`", ErrNoKernel, path)
}
