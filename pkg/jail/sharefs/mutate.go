package sharefs

import (
	"unsafe"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// The operations that change the share. Each refuses what the policy forbids before it
// reaches the host; the helper's seccomp filter refuses the same again.

// writable refuses every change to a read-only share.
func (n *node) writable() error {
	if n.fs.readOnly {
		return unix.EROFS
	}
	return nil
}

// inDir runs fn with the O_PATH fd of the directory n.
func (n *node) inDir(name string, fn func(dfd int) error) error {
	if err := n.writable(); err != nil {
		return err
	}
	if err := validName(name); err != nil {
		return err
	}
	dfd, err := n.fs.walkDir(n.rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return fn(dfd)
}

func (n *node) Create(name string, flags p9.OpenFlags, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.File, p9.QID, uint32, error) {
	// The place is taken first, so a refused create leaves nothing on the host.
	if err := n.fs.takeNode(); err != nil {
		return nil, p9.QID{}, 0, err
	}
	defer n.fs.quota.shared()()
	var fd int
	err := n.newEntry(name, func(dfd int) error {
		var err error
		fl := int(flags)&unix.O_ACCMODE | unix.O_CREAT | unix.O_EXCL | unix.O_NOFOLLOW | unix.O_CLOEXEC
		fd, err = unix.Openat(dfd, name, fl, uint32(perm)&permMask)
		return err
	})
	if err != nil {
		n.fs.giveNode()
		return nil, p9.QID{}, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		n.fs.giveNode()
		return nil, p9.QID{}, 0, err
	}
	c := &node{fs: n.fs, rel: join(n.rel, name), fd: fd, open: true, key: inodeOf(&st), counted: true}
	n.fs.quota.opened(c.key)
	return c, qidOf(&st), 0, nil
}

func (n *node) Mkdir(name string, perm p9.FileMode, _ p9.UID, _ p9.GID) (p9.QID, error) {
	err := n.newEntry(name, func(dfd int) error {
		return unix.Mkdirat(dfd, name, uint32(perm)&permMask)
	})
	return n.childQID(name, err)
}

func (n *node) Symlink(target, name string, _ p9.UID, _ p9.GID) (p9.QID, error) {
	err := n.newEntry(name, func(dfd int) error {
		return unix.Symlinkat(target, dfd, name)
	})
	return n.childQID(name, err)
}

// Mknod refuses every node type: device nodes are the point, and fifos or sockets in a
// host directory are not worth a special case.
func (n *node) Mknod(string, p9.FileMode, uint32, uint32, p9.UID, p9.GID) (p9.QID, error) {
	return p9.QID{}, unix.EPERM
}

// newEntry runs mk in name's directory with entryCost of the quota taken, and gives it
// back when mk fails.
func (n *node) newEntry(name string, mk func(dfd int) error) error {
	if err := n.writable(); err != nil {
		return err
	}
	if !n.fs.quota.reserve(entryCost) {
		return unix.ENOSPC
	}
	err := n.inDir(name, mk)
	if err != nil {
		n.fs.quota.release(entryCost)
	}
	return err
}

func (n *node) childQID(name string, err error) (p9.QID, error) {
	if err != nil {
		return p9.QID{}, err
	}
	st, err := n.fs.lstat(join(n.rel, name))
	if err != nil {
		return p9.QID{}, err
	}
	return qidOf(&st), nil
}

// Link makes a hard link to another file of the same share; the guest cannot name
// anything outside it.
func (n *node) Link(target p9.File, name string) error {
	t, ok := target.(*node)
	if !ok || t.fs != n.fs {
		return unix.EXDEV
	}
	// A new link keeps the file's data when its other link goes.
	defer n.fs.quota.alone()()
	return n.newEntry(name, func(dfd int) error {
		tdfd, tname, err := n.fs.parent(t.rel)
		if err != nil {
			return err
		}
		defer unix.Close(tdfd)
		return unix.Linkat(tdfd, tname, dfd, name, 0)
	})
}

func (n *node) RenameAt(oldName string, newDir p9.File, newName string) error {
	d, ok := newDir.(*node)
	if !ok || d.fs != n.fs {
		return unix.EXDEV
	}
	if err := validName(newName); err != nil {
		return err
	}
	defer n.fs.quota.alone()()
	return n.inDir(oldName, func(odfd int) error {
		ndfd, err := n.fs.walkDir(d.rel)
		if err != nil {
			return err
		}
		defer unix.Close(ndfd)
		// Renaming onto another link of the same file changes nothing, so it frees
		// nothing either.
		var st, src unix.Stat_t
		replaced := unix.Fstatat(ndfd, newName, &st, unix.AT_SYMLINK_NOFOLLOW) == nil &&
			(unix.Fstatat(odfd, oldName, &src, unix.AT_SYMLINK_NOFOLLOW) != nil || src.Dev != st.Dev || src.Ino != st.Ino)
		if err := unix.Renameat(odfd, oldName, ndfd, newName); err != nil {
			return err
		}
		if replaced {
			n.fs.quota.release(n.fs.quota.removing(&st))
		}
		return nil
	})
}

func (n *node) UnlinkAt(name string, flags uint32) error {
	defer n.fs.quota.alone()()
	return n.inDir(name, func(dfd int) error {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
		if err := unix.Unlinkat(dfd, name, int(flags)&unix.AT_REMOVEDIR); err != nil {
			return err
		}
		n.fs.quota.release(n.fs.quota.removing(&st))
		return nil
	})
}

// SetAttr changes permissions (never setuid/setgid, never on the share's root), size
// (within the quota) and times. Ownership cannot change: a chown to the current owner
// succeeds as a no-op, any other is EPERM.
func (n *node) SetAttr(valid p9.SetAttrMask, attr p9.SetAttr) error {
	if err := n.writable(); err != nil {
		return err
	}
	st, err := n.fs.lstat(n.rel)
	if err != nil {
		return err
	}
	if (valid.UID && uint32(attr.UID) != st.Uid) || (valid.GID && uint32(attr.GID) != st.Gid) {
		return unix.EPERM
	}
	if valid.Permissions {
		mode := uint32(attr.Permissions) & 0o7777
		if mode&^permMask != 0 || n.rel == "." {
			return unix.EPERM
		}
		if err := n.chmod(mode); err != nil {
			return err
		}
	}
	if valid.Size {
		unlock := n.fs.quota.alone()
		// Stat again under the lock: the size the truncation's count starts from.
		st, err := n.fs.lstat(n.rel)
		if err == nil {
			err = n.truncate(st, int64(attr.Size))
		}
		unlock()
		if err != nil {
			return err
		}
	}
	if valid.ATime || valid.MTime {
		return n.utimes(valid, attr)
	}
	return nil
}

// chmod changes the mode of n itself, never of what a symlink points to.
func (n *node) chmod(mode uint32) error {
	dfd, name, err := n.fs.parent(n.rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return err
	}
	_, _, e := unix.Syscall6(unix.SYS_FCHMODAT2, uintptr(dfd), uintptr(unsafe.Pointer(p)), uintptr(mode), unix.AT_SYMLINK_NOFOLLOW, 0, 0)
	if e == unix.ENOSYS {
		// Kernels before 6.6: chmod an fd opened without following a symlink.
		fd, err := n.fs.open(n.rel, unix.O_RDONLY, 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		return unix.Fchmod(fd, mode)
	}
	if e != 0 {
		return e
	}
	return nil
}

func (n *node) truncate(st unix.Stat_t, size int64) error {
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return unix.EINVAL
	}
	grow := size - st.Size
	if grow > 0 && !n.fs.quota.reserve(grow) {
		return unix.ENOSPC
	}
	fd, err := n.fs.open(n.rel, unix.O_WRONLY, 0)
	if err == nil {
		err = unix.Ftruncate(fd, size)
		unix.Close(fd)
	}
	switch {
	case err != nil && grow > 0:
		n.fs.quota.release(grow)
	case err == nil && grow < 0:
		n.fs.quota.release(-grow)
	}
	return err
}

func (n *node) utimes(valid p9.SetAttrMask, attr p9.SetAttr) error {
	ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
	set := func(i int, on, explicit bool, sec, nsec uint64) {
		switch {
		case !on:
		case explicit:
			ts[i] = unix.Timespec{Sec: int64(sec), Nsec: int64(nsec)}
		default:
			ts[i] = unix.Timespec{Nsec: unix.UTIME_NOW}
		}
	}
	set(0, valid.ATime, valid.ATimeNotSystemTime, attr.ATimeSeconds, attr.ATimeNanoSeconds)
	set(1, valid.MTime, valid.MTimeNotSystemTime, attr.MTimeSeconds, attr.MTimeNanoSeconds)
	if n.rel == "." {
		return unix.UtimesNanoAt(n.fs.root, ".", ts, 0)
	}
	dfd, name, err := n.fs.parent(n.rel)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	return unix.UtimesNanoAt(dfd, name, ts, unix.AT_SYMLINK_NOFOLLOW)
}

// Extended attributes are neither read nor written: security.capability and friends
// are exactly what a guest must not plant.
func (n *node) SetXattr(string, []byte, p9.XattrFlags) error { return unix.EOPNOTSUPP }
func (n *node) GetXattr(string) ([]byte, error)              { return nil, unix.ENODATA }
func (n *node) ListXattrs() ([]string, error)                { return nil, nil }
func (n *node) RemoveXattr(string) error                     { return unix.EOPNOTSUPP }
