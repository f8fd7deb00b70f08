package jail

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/host"
	"golang.org/x/sys/unix"
)

// enterJail turns the calling OS thread into the jail QEMU is forked from: a mount and a
// UTS namespace of its own holding only the view in cfg, no_new_privs and no ambient
// capabilities. A child forked from this thread inherits all of it, so nothing of
// crackbox has to run again in the child before QEMU's exec. The caller has locked the
// thread and never unlocks it, so the thread ends with its goroutine (lockedOffMain).
// join puts the thread into the run's v1 cgroup leaf right before the fork and leave
// takes it back out after; the view has no /sys, so both are opened first.
func enterJail(cfg jailConfig) (join, leave func() error, err error) {
	tid := []byte(strconv.Itoa(unix.Gettid()))
	var leaf, home []*os.File
	closeAll := func() {
		for _, f := range append(leaf, home...) {
			f.Close()
		}
	}
	for _, p := range cfg.Tasks {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("cgroup %s: %w", p, err)
		}
		leaf = append(leaf, f)
	}
	for _, p := range cfg.HomeTasks {
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			closeAll()
			return nil, nil, fmt.Errorf("cgroup %s: %w", p, err)
		}
		home = append(home, f)
	}
	if err := enterView(cfg); err != nil {
		closeAll()
		return nil, nil, err
	}
	write := func(fs []*os.File, what string) error {
		var errs []error
		for _, f := range fs {
			if _, err := f.Write(tid); err != nil {
				errs = append(errs, fmt.Errorf("%s the vmm cgroup %s: %w", what, f.Name(), err))
			}
		}
		return errors.Join(errs...)
	}
	join = func() error { return write(leaf, "join") }
	leave = func() error {
		defer closeAll()
		return write(home, "leave")
	}
	return join, leave, nil
}

func enterView(cfg jailConfig) error {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS | unix.CLONE_NEWUTS); err != nil {
		return fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Sethostname([]byte("vmm")); err != nil {
		return fmt.Errorf("hostname: %w", err)
	}
	if err := buildRoot(cfg); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("no_new_privs: %w", err)
	}
	return nil
}

// buildRoot mounts a tmpfs on cfg.Root, puts the binds, links and devices on it, a
// /proc that hides other users' processes, and pivots into it.
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
		// A bind made there first (a QEMU found under /bin) would hide the link's target.
		if err := os.Symlink(l[1], filepath.Join(r, l[0])); err != nil {
			if t, rerr := os.Readlink(filepath.Join(r, l[0])); rerr != nil || t != l[1] {
				return fmt.Errorf("link %s: %w", l[0], err)
			}
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
	// This thread is in the host's pid namespace, so the procfs is the host's; with
	// hidepid=2 a process sees only the pid directories of its own uid, and QEMU's uid is
	// the run's alone. QEMU needs /proc for /dev/fd/N (its kernel and initrd).
	if err := unix.Mount("proc", filepath.Join(r, "proc"), "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "hidepid=2"); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	// Before Linux 5.8 a pid namespace has one procfs whose options all its mounts share,
	// so this mount would be the host's /proc, hidepid ignored: refuse rather than show
	// QEMU every host process.
	var jp, hp unix.Stat_t
	if err := unix.Stat(filepath.Join(r, "proc"), &jp); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if err := unix.Stat("/proc", &hp); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	if jp.Dev == hp.Dev {
		return host.ErrSharedProcfs
	}
	if err := maskProc(r); err != nil {
		return err
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

// maskedProc are the files of the host's /proc that every uid may read but
// QEMU has no use for: the kernel command line may carry host secrets (a
// disk key, a token a platform put there).
var maskedProc = []string{"cmdline"}

// maskProc binds the host's /dev/null, read-only, over each of maskedProc,
// as container runtimes do: reads find it empty. (An empty file of the root
// tmpfs would have to stay there, or keep the root from turning read-only.)
func maskProc(r string) error {
	var st unix.Statfs_t
	if err := unix.Statfs("/dev/null", &st); err != nil {
		return fmt.Errorf("mask /proc: %w", err)
	}
	flags := uintptr(unix.MS_REMOUNT | unix.MS_BIND | unix.MS_RDONLY | unix.MS_NOSUID | unix.MS_NOEXEC)
	if st.Flags&unix.ST_NODEV != 0 {
		flags |= unix.MS_NODEV // locked where /dev has it; reads then fail instead
	}
	for _, name := range maskedProc {
		dst := filepath.Join(r, "proc", name)
		if err := unix.Mount("/dev/null", dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
		if err := unix.Mount("", dst, "", flags, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
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
