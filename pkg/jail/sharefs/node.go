package sharefs

import (
	"bytes"
	"encoding/binary"
	"io"
	"path"
	"sync"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// node is one fid: a path relative to the share's root, re-walked for every operation,
// and an open fd once the guest opened it.
type node struct {
	p9.DefaultWalkGetAttr
	fs    *fsys
	rel   string
	fd    int // -1 or 0 until opened
	open  bool
	key   inode      // the opened file's, for the quota's count of open fids
	dirMu sync.Mutex // one listing at a time moves the directory fd's offset
	// counted: made by newNode, so Close gives its place back.
	counted bool
}

var _ p9.File = (*node)(nil)

func (n *node) Walk(names []string) ([]p9.QID, p9.File, error) {
	rel := n.rel
	var qids []p9.QID
	for _, name := range names {
		if err := validName(name); err != nil {
			return nil, nil, err
		}
		rel = join(rel, name)
		if n.fs.hidden[rel] {
			return nil, nil, unix.ENOENT
		}
		st, err := n.fs.lstat(rel)
		if err != nil {
			return nil, nil, err
		}
		qids = append(qids, qidOf(&st))
	}
	if len(names) == 0 {
		if _, err := n.fs.lstat(rel); err != nil {
			return nil, nil, err
		}
	}
	nn, err := n.fs.newNode(rel)
	if err != nil {
		return nil, nil, err
	}
	return qids, nn, nil
}

func (n *node) GetAttr(req p9.AttrMask) (p9.QID, p9.AttrMask, p9.Attr, error) {
	var st unix.Stat_t
	var err error
	if n.open {
		err = unix.Fstat(n.fd, &st)
	} else {
		st, err = n.fs.lstat(n.rel)
	}
	if err != nil {
		return p9.QID{}, p9.AttrMask{}, p9.Attr{}, err
	}
	return qidOf(&st), p9.AttrMaskAll, attrOf(&st), nil
}

func (n *node) StatFS() (p9.FSStat, error) {
	var s unix.Statfs_t
	if err := unix.Fstatfs(n.fs.root, &s); err != nil {
		return p9.FSStat{}, err
	}
	out := p9.FSStat{Type: v9fsMagic, BlockSize: uint32(s.Bsize), Blocks: s.Blocks, BlocksFree: s.Bfree,
		BlocksAvailable: s.Bavail, Files: s.Files, FilesFree: s.Ffree, NameLength: 255}
	n.fs.quota.statfs(&out)
	return out, nil
}

func (n *node) Open(mode p9.OpenFlags) (p9.QID, uint32, error) {
	flags := int(mode) & (unix.O_ACCMODE | unix.O_TRUNC | unix.O_DIRECTORY)
	if flags&unix.O_ACCMODE != unix.O_RDONLY || flags&unix.O_TRUNC != 0 {
		if n.fs.readOnly {
			return p9.QID{}, 0, unix.EROFS
		}
	}
	// The truncation is done on the opened file, so the quota gets back exactly what
	// it freed, and nothing when the open fails.
	trunc := flags&unix.O_TRUNC != 0
	var unlock func()
	if trunc {
		unlock = n.fs.quota.alone()
	} else {
		unlock = n.fs.quota.shared()
	}
	defer unlock()
	fd, err := n.fs.open(n.rel, flags&^unix.O_TRUNC, 0)
	if err != nil {
		return p9.QID{}, 0, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return p9.QID{}, 0, err
	}
	if trunc && st.Mode&unix.S_IFMT == unix.S_IFREG {
		err := unix.Ftruncate(fd, 0)
		if err == nil {
			n.fs.quota.release(st.Size)
		} else if flags&unix.O_ACCMODE == unix.O_RDONLY {
			err = n.truncate(st, 0) // Linux truncates on O_RDONLY|O_TRUNC too
		}
		if err != nil {
			unix.Close(fd)
			return p9.QID{}, 0, err
		}
		st.Size = 0
	}
	n.fd, n.open, n.key = fd, true, inodeOf(&st)
	n.fs.quota.opened(n.key)
	return qidOf(&st), 0, nil
}

func (n *node) ReadAt(p []byte, off int64) (int, error) {
	if !n.open {
		return 0, unix.EBADF
	}
	return unix.Pread(n.fd, p, off)
}

func (n *node) WriteAt(p []byte, off int64) (int, error) {
	if !n.open {
		return 0, unix.EBADF
	}
	defer n.fs.quota.shared()()
	var st unix.Stat_t
	if err := unix.Fstat(n.fd, &st); err != nil {
		return 0, err
	}
	grow := max(0, off+int64(len(p))-st.Size)
	if !n.fs.quota.reserve(grow) {
		return 0, unix.ENOSPC
	}
	w, err := unix.Pwrite(n.fd, p, off)
	if w < len(p) {
		n.fs.quota.release(grow - max(0, off+int64(max(w, 0))-st.Size))
	}
	if err != nil {
		return 0, err
	}
	return w, nil
}

func (n *node) FSync() error {
	if !n.open {
		return nil
	}
	return unix.Fsync(n.fd)
}

func (n *node) Close() error {
	if n.counted {
		n.counted = false
		n.fs.giveNode()
	}
	if n.open {
		n.open = false
		defer n.fs.quota.alone()()
		n.fs.quota.closing(n.key, n.fd)
		return unix.Close(n.fd)
	}
	return nil
}

// Lock is advisory and local to the guest: the host keeps no lock for it.
func (n *node) Lock(int, p9.LockType, p9.LockFlags, uint64, uint64, string) (p9.LockStatus, error) {
	return p9.LockStatusOK, nil
}

func (n *node) Readlink() (string, error) {
	dfd, name, err := n.fs.parent(n.rel)
	if err != nil {
		return "", unix.EINVAL
	}
	defer unix.Close(dfd)
	buf := make([]byte, unix.PathMax)
	k, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:k]), nil
}

// Readdir lists from the opened directory itself, resuming at offset (the kernel's
// cookie of the last entry the guest has), and returns what fits in count bytes. Nothing
// is kept between calls, so a guest holding many open listings of a big directory costs
// the server one buffer per call, not a copy of the directory per fid.
func (n *node) Readdir(offset uint64, count uint32) (p9.Dirents, error) {
	if !n.open {
		return nil, unix.EBADF
	}
	n.dirMu.Lock()
	defer n.dirMu.Unlock()
	if _, err := unix.Seek(n.fd, int64(offset), io.SeekStart); err != nil {
		return nil, err
	}
	// The guest names count; one reply never lists more than a buffer's worth, and the
	// guest's kernel asks again.
	count = min(count, readdirBuf)
	buf := make([]byte, min(max(int(count), 4096), readdirBuf))
	var out p9.Dirents
	size := 0
	for {
		k, err := unix.Getdents(n.fd, buf)
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return out, nil
		}
		for b := buf[:k]; len(b) >= direntHeader; {
			reclen := int(binary.NativeEndian.Uint16(b[16:18]))
			if reclen < direntHeader || reclen > len(b) {
				return nil, unix.EIO
			}
			off := binary.NativeEndian.Uint64(b[8:16])
			dtype := b[18] // the kernel's DT_*, which Linux's client hands on as d_type
			name, _, _ := bytes.Cut(b[direntHeader:reclen], []byte{0})
			b = b[reclen:]
			nm := string(name)
			var st unix.Stat_t
			if nm == "." || nm == ".." || n.fs.hidden[join(n.rel, nm)] ||
				unix.Fstatat(n.fd, nm, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
				continue // hidden, or gone since the kernel listed it
			}
			// 9p's encoding of an entry: qid 13, offset 8, type 1, name 2 + its bytes.
			if size += 24 + len(nm); size > int(count) {
				return out, nil
			}
			q := qidOf(&st)
			out = append(out, p9.Dirent{QID: q, Type: p9.QIDType(dtype), Name: nm, Offset: off})
		}
	}
}

// The fixed part of a linux_dirent64 (ino 8, off 8, reclen 2, type 1), and the most one
// Readdir reads from the kernel at a time.
const (
	direntHeader = 19
	readdirBuf   = 64 << 10
)

func (n *node) Renamed(newDir p9.File, newName string) {
	n.rel = join(newDir.(*node).rel, newName)
}

func (n *node) Rename(newDir p9.File, newName string) error {
	d, ok := newDir.(*node)
	if !ok {
		return unix.EXDEV
	}
	dir, name := path.Split(n.rel)
	if n.rel == "." {
		return unix.EBUSY
	}
	return (&node{fs: n.fs, rel: cleanDir(dir)}).RenameAt(name, d, newName)
}

// cleanDir turns path.Split's directory part into a rel.
func cleanDir(dir string) string {
	if dir == "" {
		return "."
	}
	return path.Clean(dir)
}
