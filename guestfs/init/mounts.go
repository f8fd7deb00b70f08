package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// baseDirs are the kernel and scratch filesystems every guest gets, in mount order.
var baseDirs = []struct {
	target, fstype, data string
	flags                uintptr
}{
	{"/proc", "proc", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	{"/sys", "sysfs", "", unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC},
	{"/dev", "devtmpfs", "mode=0755", unix.MS_NOSUID},
	{"/dev/pts", "devpts", "mode=0620,ptmxmode=0666,gid=5", unix.MS_NOSUID | unix.MS_NOEXEC},
	{"/dev/shm", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
	{"/tmp", "tmpfs", "mode=1777", unix.MS_NOSUID | unix.MS_NODEV},
	{"/run", "tmpfs", "mode=0755", unix.MS_NOSUID | unix.MS_NODEV},
}

func baseMounts() error {
	// The initramfs root is a tmpfs whose root directory defaults to 1777.
	if err := os.Chmod("/", 0o755); err != nil {
		return err
	}
	for _, m := range baseDirs {
		if err := os.MkdirAll(m.target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m.fstype, m.target, m.fstype, m.flags, m.data); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.fstype, m.target, err)
		}
	}
	return nil
}

// staging holds the raw shares and the overlay upper layers while the root is built.
// It is detached afterwards, so the command never sees a lower share unmasked.
const staging = "/.crackbox"

// roLower9p mounts a read-only QEMU virtio-9p lower (/usr, /opt). The guest kernel keeps
// each listing it read whole on the directory's inode (guestfs/kernel/9p-dircache.patch)
// and lists through a buffer of at most 64 KiB, so the msize only sizes reads: readahead
// fetches up to an msize per request.
const roLower9p = "trans=virtio,version=9p2000.L,msize=512000,cache=loose"

// mountShare mounts a host share. Read-only lowers use 9p's page cache: they do not
// change under a run, and every page fetched over 9p is emulated work under TCG.
func mountShare(m control.Mount, target string, readOnly bool) error {
	var flags uintptr
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	var data string
	switch m.FSType {
	case "9p", "":
		data = "trans=virtio,version=9p2000.L,msize=512000"
		if readOnly {
			data = roLower9p
		}
		if err := unix.Mount(m.Tag, target, "9p", flags, data); err != nil {
			return shareErr("9p", m.Tag, target, err)
		}
	case "virtiofs":
		if err := unix.Mount(m.Tag, target, "virtiofs", flags, ""); err != nil {
			return shareErr("virtiofs", m.Tag, target, err)
		}
	default:
		return fmt.Errorf("share %q: fstype %q, want 9p or virtiofs", m.Tag, m.FSType)
	}
	return nil
}

// mountAny mounts a share of any kind at target.
func mountAny(ctx context.Context, m control.Mount, target string, readOnly bool) error {
	if m.FSType == fsStream {
		return mountStream(ctx, m, target, readOnly)
	}
	return mountShare(m, target, readOnly)
}

func shareErr(fstype, tag, target string, err error) error {
	// 9p reports an unknown tag as ENOENT, virtio-fs as EINVAL.
	if (fstype == "9p" && errors.Is(err, unix.ENOENT)) || (fstype == "virtiofs" && errors.Is(err, unix.EINVAL)) {
		return fmt.Errorf("mount %s share %q on %s: no %s device with that tag is attached to this VM", fstype, tag, target, fstype)
	}
	return fmt.Errorf("mount %s share %q on %s: %w", fstype, tag, target, err)
}

// overlayLower mounts lower share i read-only in the staging area and a tmpfs-backed
// overlay of it at target, so the command can write anywhere and nothing reaches the host.
func overlayLower(ctx context.Context, i int, m control.Mount, target string) error {
	dir := fmt.Sprintf("%s/%d", staging, i)
	lower, upper, work := dir+"/lower", dir+"/upper", dir+"/work"
	for _, d := range []string{lower, upper, work, target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := mountAny(ctx, m, lower, true); err != nil {
		return err
	}
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", target, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s (share %q): %w", target, m.Tag, err)
	}
	return nil
}

func checkTarget(what, p string) error {
	if !filepath.IsAbs(p) || filepath.Clean(p) != p {
		return fmt.Errorf("%s target %q must be a clean absolute path", what, p)
	}
	return nil
}

// buildRoot builds the command's root. hostview: an overlay per lower at its own path
// in the initramfs root. rootfs: the lower with target "/" becomes a new root, the base
// mounts move into it, and the process switches to it (MS_MOVE + chroot).
func buildRoot(ctx context.Context, r control.Root) error {
	if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		if !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("staging tmpfs: %w", err)
		}
		if err := os.Mkdir(staging, 0o700); err != nil {
			return err
		}
		if err := unix.Mount("tmpfs", staging, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
			return fmt.Errorf("staging tmpfs: %w", err)
		}
	}
	prefix := ""
	switch r.Mode {
	case "hostview":
	case "rootfs":
		prefix = staging + "/root"
	default:
		return fmt.Errorf("root mode %q, want hostview or rootfs", r.Mode)
	}
	rootSeen := false
	for i, m := range r.Lower {
		if err := checkTarget("root lower", m.Target); err != nil {
			return err
		}
		if m.Target != "/" {
			continue
		}
		if r.Mode != "rootfs" || rootSeen {
			return fmt.Errorf("lower %q targets /: only one may, and only in rootfs mode", m.Tag)
		}
		rootSeen = true
		// The new root must exist before the lowers mounted inside it.
		if err := overlayLower(ctx, i, m, prefix); err != nil {
			return err
		}
	}
	errs := make(chan error, len(r.Lower))
	for i, m := range r.Lower {
		if m.Target == "/" {
			errs <- nil
			continue
		}
		// Shares are independent; their virtio round trips overlap.
		go func() { errs <- overlayLower(ctx, i, m, prefix+m.Target) }()
	}
	if r.Mode == "rootfs" && !rootSeen {
		return errors.New("rootfs mode needs a lower with target /")
	}
	var first error
	for range r.Lower {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return first
	}
	if r.Mode == "rootfs" {
		return switchRoot(prefix)
	}
	// Overlays keep private references to their layers, so the staging tree can go.
	if err := unix.Unmount(staging, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach staging: %w", err)
	}
	return os.Remove(staging)
}

// switchRoot moves the base mounts into newRoot and makes it "/".
func switchRoot(newRoot string) error {
	for _, m := range []string{"/dev", "/proc", "/sys", "/tmp", "/run"} {
		if err := os.MkdirAll(newRoot+m, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(m, newRoot+m, "", unix.MS_MOVE, ""); err != nil {
			return fmt.Errorf("move %s into the new root: %w", m, err)
		}
	}
	if err := unix.Chdir(newRoot); err != nil {
		return err
	}
	if err := unix.Mount(newRoot, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("move new root to /: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return unix.Chdir("/")
}

// makeSymlinks recreates the host's merged-/usr links (bin -> usr/bin and the like).
func makeSymlinks(links map[string]string) error {
	for name, target := range links {
		p := filepath.Join("/", name)
		if fi, err := os.Lstat(p); err == nil {
			if fi.Mode()&os.ModeSymlink != 0 {
				continue // the root already has it
			}
			if fi.IsDir() {
				if ents, _ := os.ReadDir(p); len(ents) > 0 {
					return fmt.Errorf("symlink %s -> %s: %s is a non-empty directory", p, target, p)
				}
				os.Remove(p)
			}
		}
		if err := os.Symlink(target, p); err != nil {
			return fmt.Errorf("symlink %s -> %s: %w", p, target, err)
		}
	}
	return nil
}

// maskEmpty is the empty file bound over masked files.
const maskEmpty = "/run/crackbox/empty"

// applyMasks hides paths: an empty read-only tmpfs over a directory, an empty read-only
// file over anything else. Patterns may use glob syntax; missing paths are skipped.
func applyMasks(masks []string) error {
	if len(masks) == 0 {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(maskEmpty), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(maskEmpty, nil, 0o444); err != nil {
		return err
	}
	for _, pat := range masks {
		paths := []string{pat}
		if strings.ContainsAny(pat, "*?[") {
			var err error
			if paths, err = filepath.Glob(pat); err != nil {
				return fmt.Errorf("mask pattern %q: %w", pat, err)
			}
		}
		for _, p := range paths {
			fi, err := os.Stat(p)
			if err != nil {
				continue
			}
			if fi.IsDir() {
				err = unix.Mount("tmpfs", p, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "size=4k,mode=0755")
			} else {
				err = unix.Mount(maskEmpty, p, "", unix.MS_BIND, "")
				if err == nil {
					err = unix.Mount("", p, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, "")
				}
			}
			if err != nil {
				return fmt.Errorf("mask %s: %w", p, err)
			}
		}
	}
	return nil
}

// makeHome creates $HOME empty and owned by the command's user, unless a share is
// mounted there.
func makeHome(rs *control.RunSpec) error {
	home := ""
	for _, kv := range rs.Env {
		if v, ok := strings.CutPrefix(kv, "HOME="); ok {
			home = v
		}
	}
	if home == "" || home == "/" {
		return nil
	}
	if err := checkTarget("HOME", home); err != nil {
		return err
	}
	for _, m := range rs.Mounts {
		if m.Target == home {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(home), 0o755); err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	if err := os.Mkdir(home, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("home %s: %w", home, err)
	}
	if err := os.Lchown(home, rs.UID, rs.GID); err != nil {
		return fmt.Errorf("home %s: %w", home, err)
	}
	return nil
}

// mountShares mounts the run's shares and returns those synced at exit; swap is the swap
// the guest will have, for their upper layers (upperLimit).
func mountShares(ctx context.Context, ms []control.Mount, swap int64) ([]*syncedShare, error) {
	var synced []*syncedShare
	for _, m := range ms {
		if err := checkTarget("mount", m.Target); err != nil {
			return synced, err
		}
		if err := os.MkdirAll(m.Target, 0o755); err != nil {
			return synced, fmt.Errorf("mount target %s: %w", m.Target, err)
		}
		if m.Sync == control.SyncExit && !m.ReadOnly {
			s, err := mountSynced(ctx, m, swap)
			if err != nil {
				return synced, err
			}
			synced = append(synced, s)
			continue
		}
		if err := mountAny(ctx, m, m.Target, m.ReadOnly); err != nil {
			return synced, err
		}
	}
	return synced, nil
}
