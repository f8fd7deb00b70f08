// Package sharefs serves a host directory to a guest over 9P2000.L with a containment
// policy: whatever the guest asks, nothing it does through the share creates a setuid or
// setgid file, a device node, an extended attribute, a file owned by anyone but the
// server's own uid, or changes the owner or mode of the share's root, and a share may
// grow by at most its quota. The server never follows a symlink on the host: every path
// is walked one component at a time from the share's root with O_NOFOLLOW.
//
// The server runs in a process of its own (helper.go), chrooted into the share, as the
// share's owner with no capabilities and a seccomp filter that refuses the same
// operations again, so a bug here cannot reach the rest of the host.
package sharefs

import (
	"path"
	"strings"
	"sync/atomic"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// permMask is the mode bits the guest may set: permissions and the sticky bit, never
// setuid or setgid.
const permMask = 0o1777

// v9fsMagic is what statfs reports as the filesystem type.
const v9fsMagic = 0x01021997

// maxNodes bounds the fids one share connection holds at once. Each costs the server
// about half a KiB (and an fd once opened), and a guest may ask for fids without end;
// with cache=none the guest's kernel holds one per open file or directory in use, far
// fewer than this.
const maxNodes = 1 << 16

// fsys is one served share.
type fsys struct {
	root     int // O_PATH fd of the share's root directory
	readOnly bool
	quota    *quota
	hidden   map[string]bool // rel paths that do not exist for the guest
	live     atomic.Int32    // nodes handed to the 9p server and not yet closed
	dirs     *dirCache       // an apply's open directories (apply_dirs.go); nil when serving 9p
}

// takeNode takes a place for a node, or fails with ENFILE when the connection holds
// maxNodes already. The node made for it gives the place back when the 9p server
// closes it; a caller that makes none calls giveNode.
func (fs *fsys) takeNode() error {
	if fs.live.Add(1) > maxNodes {
		fs.live.Add(-1)
		return unix.ENFILE
	}
	return nil
}

func (fs *fsys) giveNode() { fs.live.Add(-1) }

// newNode takes a place and makes a node for the 9p server.
func (fs *fsys) newNode(rel string) (*node, error) {
	if err := fs.takeNode(); err != nil {
		return nil, err
	}
	return &node{fs: fs, rel: rel, counted: true}, nil
}

// attacher hands out the share's root.
type attacher struct{ fs *fsys }

func (a attacher) Attach() (p9.File, error) {
	n, err := a.fs.newNode(".")
	if err != nil {
		return nil, err
	}
	return n, nil
}

// walkDir opens the directory at rel (relative to the root) as an O_PATH fd, refusing
// symlinks in every component.
func (fs *fsys) walkDir(rel string) (int, error) {
	if fs.dirs != nil {
		return fs.dirs.walk(fs.root, rel)
	}
	fd, err := unix.Dup(fs.root)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if rel == "." || rel == "" {
		return fd, nil
	}
	for _, c := range strings.Split(rel, "/") {
		nfd, err := unix.Openat(fd, c, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, err
		}
		fd = nfd
	}
	return fd, nil
}

// parent opens rel's parent directory and returns it with rel's last component. The
// root has no parent inside the share.
func (fs *fsys) parent(rel string) (int, string, error) {
	if rel == "." {
		return -1, "", unix.EPERM
	}
	dir, name := path.Split(rel)
	dfd, err := fs.walkDir(strings.TrimSuffix(dir, "/"))
	return dfd, name, err
}

// open opens rel with flags (O_NOFOLLOW always added).
func (fs *fsys) open(rel string, flags int, mode uint32) (int, error) {
	flags |= unix.O_NOFOLLOW | unix.O_CLOEXEC
	if rel == "." {
		return unix.Openat(fs.root, ".", flags, mode)
	}
	dfd, name, err := fs.parent(rel)
	if err != nil {
		return -1, err
	}
	defer unix.Close(dfd)
	return unix.Openat(dfd, name, flags, mode)
}

// lstat stats rel without following a final symlink.
func (fs *fsys) lstat(rel string) (unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := fs.open(rel, unix.O_PATH, 0)
	if err != nil {
		return st, err
	}
	defer unix.Close(fd)
	err = unix.Fstat(fd, &st)
	return st, err
}

func qidOf(st *unix.Stat_t) p9.QID {
	return p9.QID{Type: p9.FileMode(st.Mode).QIDType(), Path: st.Ino}
}

func attrOf(st *unix.Stat_t) p9.Attr {
	return p9.Attr{
		Mode: p9.FileMode(st.Mode), UID: p9.UID(st.Uid), GID: p9.GID(st.Gid),
		NLink: p9.NLink(st.Nlink), RDev: p9.Dev(st.Rdev), Size: uint64(st.Size),
		BlockSize: uint64(st.Blksize), Blocks: uint64(st.Blocks),
		ATimeSeconds: uint64(st.Atim.Sec), ATimeNanoSeconds: uint64(st.Atim.Nsec),
		MTimeSeconds: uint64(st.Mtim.Sec), MTimeNanoSeconds: uint64(st.Mtim.Nsec),
		CTimeSeconds: uint64(st.Ctim.Sec), CTimeNanoSeconds: uint64(st.Ctim.Nsec),
	}
}

// join names a child of rel.
func join(rel, name string) string {
	if rel == "." {
		return name
	}
	return rel + "/" + name
}

// validName refuses names that are not one plain component; the 9p server checks this
// too, the filesystem does not rely on it.
func validName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsRune(name, '/') || strings.ContainsRune(name, 0) {
		return unix.EINVAL
	}
	return nil
}
