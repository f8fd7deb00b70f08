package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// Every binary that links this package can be the launcher: vmmJail.command re-executes
// /proc/self/exe with argv[0] set to vmmLauncherName, and this runs before main (or the
// test binary's flag parsing) sees the arguments.
func init() {
	if len(os.Args) < 3 || os.Args[0] != vmmLauncherName {
		return
	}
	runtime.LockOSThread() // no_new_privs and the parent-death signal are per thread
	var cfg jailConfig
	if err := json.Unmarshal([]byte(os.Args[1]), &cfg); err != nil {
		launcherFail(fmt.Errorf("config: %w", err))
	}
	launcherFail(launch(cfg, os.Args[2], os.Args[2:]))
}

func launcherFail(err error) {
	fmt.Fprintf(os.Stderr, "%s: %v\n", vmmLauncherName, err)
	os.Exit(127)
}

// launch builds the jail from inside the new namespaces and execs bin; it returns only
// on failure.
func launch(cfg jailConfig, bin string, argv []string) error {
	for _, p := range cfg.Procs {
		if err := os.WriteFile(p, []byte("0"), 0); err != nil {
			return fmt.Errorf("join cgroup %s: %w", p, err)
		}
	}
	if err := buildRoot(cfg); err != nil {
		return err
	}
	if err := unix.Sethostname([]byte("vmm")); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := dropPrivileges(cfg); err != nil {
		return err
	}
	return fmt.Errorf("exec %s: %w", bin, syscall.Exec(bin, argv, vmmEnv))
}

// buildRoot mounts a tmpfs on cfg.Root, puts the binds, links and devices on it, a
// private /proc, and pivots into it.
func buildRoot(cfg jailConfig) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	r := cfg.Root
	if err := unix.Mount("tmpfs", r, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0755,size=1m"); err != nil {
		return fmt.Errorf("root tmpfs: %w", err)
	}
	// Parents first: a bind made after one below it would hide it.
	binds := slices.Clone(cfg.Binds)
	slices.SortStableFunc(binds, func(a, b jailBind) int {
		return strings.Count(filepath.Clean(a.Path), "/") - strings.Count(filepath.Clean(b.Path), "/")
	})
	for _, b := range binds {
		if err := bindInto(r, b.Path, b.RW); err != nil {
			return err
		}
	}
	for _, d := range cfg.Devices {
		if err := bindInto(r, d, true); err != nil {
			return err
		}
	}
	for _, l := range cfg.Links {
		if err := os.Symlink(l[1], filepath.Join(r, l[0])); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("link %s: %w", l[0], err)
		}
	}
	if err := os.MkdirAll(filepath.Join(r, "dev"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/proc/self/fd", filepath.Join(r, "dev/fd")); err != nil {
		return fmt.Errorf("link /dev/fd: %w", err)
	}
	if err := os.Mkdir(filepath.Join(r, "proc"), 0o555); err != nil {
		return err
	}
	// The pid namespace is new, so this /proc shows the jail's processes only.
	if err := unix.Mount("proc", filepath.Join(r, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := os.Chdir(r); err != nil {
		return err
	}
	// pivot_root(".", ".") stacks the old root under the new one; detaching it leaves
	// nothing of the host's tree reachable.
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := os.Chdir("/"); err != nil {
		return err
	}
	if err := unix.Mount("", "/", "", unix.MS_REMOUNT|unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, ""); err != nil {
		return fmt.Errorf("read-only root: %w", err)
	}
	return nil
}

// bindInto bind-mounts host path to the same path under root; read-only unless rw, and
// never with setuid or device files honoured (devices are bound explicitly).
func bindInto(root, path string, rw bool) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	dst := filepath.Join(root, path)
	if err := mountPoint(dst, fi.IsDir()); err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	if err := unix.Mount(path, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return fmt.Errorf("bind %s: %w", path, err)
	}
	// A remount must keep the flags a user namespace may not clear (locked ones).
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_NOSUID)
	for _, f := range [][2]uintptr{{unix.ST_NODEV, unix.MS_NODEV}, {unix.ST_NOEXEC, unix.MS_NOEXEC}, {unix.ST_NOATIME, unix.MS_NOATIME}, {unix.ST_RDONLY, unix.MS_RDONLY}} {
		if uintptr(st.Flags)&f[0] != 0 {
			flags |= f[1]
		}
	}
	if fi.IsDir() || fi.Mode().IsRegular() {
		flags |= unix.MS_NODEV // device nodes are usable only where bound one by one
	}
	if !rw {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", dst, "", flags, ""); err != nil {
		return fmt.Errorf("remount %s: %w", path, err)
	}
	return nil
}

// mountPoint makes dst, a directory or an empty file, unless it is already there inside
// an earlier bind (which may be read-only): then the bind goes over it.
func mountPoint(dst string, dir bool) error {
	if _, err := os.Lstat(dst); err == nil {
		return nil
	}
	if dir {
		return os.MkdirAll(dst, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// dropPrivileges becomes QEMU's user (as root) or sheds the launcher's capabilities (in
// a user namespace), then sets no_new_privs and the parent-death signal, which a
// credential change clears.
func dropPrivileges(cfg jailConfig) error {
	if cfg.SetID {
		groups := make([]int, len(cfg.Groups))
		for i, g := range cfg.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := syscall.Setresgid(int(cfg.GID), int(cfg.GID), int(cfg.GID)); err != nil {
			return fmt.Errorf("setresgid: %w", err)
		}
		if err := syscall.Setresuid(int(cfg.UID), int(cfg.UID), int(cfg.UID)); err != nil {
			return fmt.Errorf("setresuid: %w", err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0, 0, 0); err != nil {
		return fmt.Errorf("parent-death signal: %w", err)
	}
	return nil
}
