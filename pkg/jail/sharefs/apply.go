package sharefs

import (
	"archive/tar"
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path"
	"strings"
	"time"
	"unsafe"

	"github.com/hugelgupf/p9/p9"

	"github.com/crackbox/crackbox/pkg/jail/control"
	"golang.org/x/sys/unix"
)

// A changes stream is how a guest that kept its writes in a layer of its own hands them
// back when the run ends: a tar stream of what the layer holds, applied by a share
// server in the same confinement, through the same node operations the 9p server uses,
// so the policy is the live share's (no symlink followed, no setuid/setgid bit, no
// device, fifo or socket, no xattr, the quota).
//
// Entries are applied in order; a directory comes before what it holds. Two PAX
// records (pkg/jail/control) mark what the layer cannot say as a plain file.
const (
	PAXRemove = control.SyncRemove
	PAXOpaque = control.SyncOpaque
)

// ApplyResult counts what a changes stream did; Refused and Failed name up to a few
// paths each.
type ApplyResult struct {
	Applied, Removed, Neutralised int
	Refused, Failed               []string
	nRefused, nFailed             int
}

// String is the one line the server answers the guest with, and logs.
func (r ApplyResult) String() string {
	return fmt.Sprintf("applied=%d removed=%d neutralised=%d refused=%d %v failed=%d %v",
		r.Applied, r.Removed, r.Neutralised, r.nRefused, r.Refused, r.nFailed, r.Failed)
}

// maxNamed bounds the paths a result names: the guest chooses them.
const maxNamed = 5

func (r *ApplyResult) refuse(name string, why error) {
	r.nRefused++
	if len(r.Refused) < maxNamed {
		r.Refused = append(r.Refused, fmt.Sprintf("%q: %v", name, why))
	}
}

func (r *ApplyResult) fail(name string, why error) {
	r.nFailed++
	if len(r.Failed) < maxNamed {
		r.Failed = append(r.Failed, fmt.Sprintf("%q: %v", name, why))
	}
}

// errNotPlain refuses an entry type the share never holds.
var errNotPlain = errors.New("not a file, directory or symlink")

// apply reads a changes stream from r and applies it to the share. It stops at the
// first error of the stream itself (a bad header, data shorter than its header says)
// or when the quota is full; what was applied before stays.
func (fs *fsys) apply(r io.Reader) (ApplyResult, error) {
	var res ApplyResult
	if fs.readOnly {
		return res, unix.EROFS
	}
	if fs.dirs == nil {
		fs.dirs = newDirCache()
	}
	defer func() { fs.dirs.close(); fs.dirs = nil }()
	tr := tar.NewReader(r)
	buf := make([]byte, 1<<20) // one for every file: a stream holds thousands
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return res, nil
		}
		if err != nil {
			return res, fmt.Errorf("changes stream: %w", err)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			res.refuse(hdr.Name, err)
			continue
		}
		if name == "." {
			continue // the share's root keeps its mode
		}
		if err := fs.applyEntry(name, hdr, tr, buf, &res); err != nil {
			if errors.Is(err, unix.ENOSPC) {
				return res, fmt.Errorf("%s: %w (the disk quota is full)", name, err)
			}
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return res, fmt.Errorf("%s: changes stream: %w", name, err)
			}
			res.fail(name, err)
		}
	}
}

// entryName cleans a stream's path: relative, inside the share, one valid component
// at a time.
func entryName(raw string) (string, error) {
	p := strings.TrimSuffix(raw, "/")
	if p == "" || p == "." || p == "./" {
		return ".", nil
	}
	p = strings.TrimPrefix(p, "./")
	if path.IsAbs(p) || path.Clean(p) != p {
		return "", unix.EINVAL
	}
	for _, c := range strings.Split(p, "/") {
		if err := validName(c); err != nil {
			return "", err
		}
	}
	return p, nil
}

// applyEntry applies one entry at name.
func (fs *fsys) applyEntry(name string, hdr *tar.Header, data io.Reader, buf []byte, res *ApplyResult) error {
	dirPath, base := path.Split(name)
	for p := name; p != "."; p = path.Dir(p) {
		if fs.hidden[p] {
			res.refuse(name, unix.ENOENT)
			return nil
		}
	}
	dir, err := fs.dirNode(cleanDir(dirPath))
	if err != nil {
		return err
	}
	mode := uint32(hdr.Mode) & 0o7777
	if mode&^permMask != 0 {
		mode &= permMask
		res.Neutralised++
	}
	if hdr.PAXRecords[PAXRemove] != "" {
		if err := removeAll(dir, base); err != nil {
			return err
		}
		res.Removed++
		return nil
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = fs.applyDir(dir, base, mode, hdr.PAXRecords[PAXOpaque] != "")
	case tar.TypeReg:
		err = fs.applyFile(dir, base, mode, hdr, data, buf)
	case tar.TypeSymlink:
		if err = removeAll(dir, base); err == nil {
			_, err = dir.Symlink(hdr.Linkname, base, 0, 0)
		}
	default:
		res.refuse(name, errNotPlain)
		return nil
	}
	if err == nil {
		res.Applied++
	}
	return err
}

// dirNode is the directory rel, which must exist. Every operation on the node walks
// to it again (walkDir opens each component O_DIRECTORY|O_NOFOLLOW, or takes the fd a
// walk of the same path opened so since the last removal there), so a symlink the
// stream planted earlier is never a way out.
func (fs *fsys) dirNode(rel string) (*node, error) {
	if _, err := fs.dirs.dir(fs.root, rel); err != nil {
		return nil, err
	}
	return &node{fs: fs, rel: rel}, nil
}

// applyDir makes dir/name a directory with mode, emptied first when opaque.
func (fs *fsys) applyDir(dir *node, name string, mode uint32, opaque bool) error {
	// Most directories are new: made with their mode (the server's umask is 0), they
	// need nothing more. A full quota is looked at again below: a directory that is
	// there already takes none.
	_, err := dir.Mkdir(name, p9.FileMode(mode), 0, 0)
	if !errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.ENOSPC) {
		return err
	}
	st, err := fs.lstat(join(dir.rel, name))
	switch {
	case err == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR:
		if opaque {
			if err := clearDir(dir, name); err != nil {
				return err
			}
		}
		if st.Mode&0o7777 == mode {
			return nil // a parent the layer holds only for what it holds
		}
	case err == nil || !errors.Is(err, unix.ENOENT):
		if err := removeAll(dir, name); err != nil {
			return err
		}
		fallthrough
	default:
		if _, err := dir.Mkdir(name, p9.FileMode(mode), 0, 0); err != nil {
			return err
		}
	}
	_, f, err := dir.Walk([]string{name})
	if err != nil {
		return err
	}
	defer f.Close()
	return f.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: p9.FileMode(mode)})
}

// applyFile replaces dir/name with a file of hdr.Size bytes read from data. A stream
// that ends early is an error of the stream: the file keeps what arrived.
func (fs *fsys) applyFile(dir *node, name string, mode uint32, hdr *tar.Header, data io.Reader, buf []byte) error {
	// Most files are new: the create comes first, and what was there goes only when
	// the name is taken (or the quota is full: the removal may free what it needs).
	f, _, _, err := dir.Create(name, p9.WriteOnly, p9.FileMode(mode), 0, 0)
	if errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOSPC) {
		if err := removeAll(dir, name); err != nil {
			return err
		}
		f, _, _, err = dir.Create(name, p9.WriteOnly, p9.FileMode(mode), 0, 0)
	}
	if err != nil {
		return err
	}
	var off int64
	for {
		n, rerr := data.Read(buf)
		if n > 0 {
			if _, err := f.WriteAt(buf[:n], off); err != nil {
				f.Close()
				return err
			}
			off += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			f.Close()
			return rerr
		}
	}
	// The mtime is set on the file just made, through its own fd (futimens): make
	// and build tools compare it.
	ts := [2]unix.Timespec{{Nsec: unix.UTIME_OMIT}, unix.NsecToTimespec(max(0, hdr.ModTime.UnixNano()))}
	_, _, e := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(f.(*node).fd), 0, uintptr(unsafe.Pointer(&ts[0])), 0, 0, 0)
	if err := f.Close(); err != nil {
		return err
	}
	if e != 0 {
		return e
	}
	return nil
}

// removeAll removes dir/name and, for a directory, everything in it; a missing name is
// no error. It never follows a symlink: one is removed as itself. The apply's open
// directories at and under the path are forgotten once it is gone (the removal itself
// walks into it again).
func removeAll(dir *node, name string) error {
	if dir.fs.dirs != nil {
		defer dir.fs.dirs.forget(join(dir.rel, name))
	}
	qids, f, err := dir.Walk([]string{name})
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return err
	}
	f.Close()
	var flags uint32
	if qids[0].Type&p9.TypeDir != 0 {
		if err := clearDir(dir, name); err != nil {
			return err
		}
		flags = unix.AT_REMOVEDIR
	}
	return dir.UnlinkAt(name, flags)
}

// clearDir removes everything in dir/name.
func clearDir(dir *node, name string) error {
	_, f, err := dir.Walk([]string{name})
	if err != nil {
		return err
	}
	d := f.(*node)
	defer d.Close()
	if _, _, err := d.Open(p9.OpenFlags(unix.O_RDONLY | unix.O_DIRECTORY)); err != nil {
		return err
	}
	var names []string
	var off uint64
	for {
		ents, err := d.Readdir(off, readdirBuf)
		if err != nil {
			return err
		}
		if len(ents) == 0 {
			break
		}
		for _, e := range ents {
			names = append(names, e.Name)
		}
		off = ents[len(ents)-1].Offset
	}
	sub := &node{fs: d.fs, rel: d.rel}
	for _, nm := range names {
		if err := removeAll(sub, nm); err != nil {
			return err
		}
	}
	return nil
}

// answerApply applies the changes stream on conn and answers with one line: "ok",
// "partial" (some entries refused or failed) or "error" (the stream stopped short),
// then the result.
func answerApply(fs *fsys, conn io.ReadWriteCloser) error {
	defer conn.Close()
	// Headers are read 512 bytes at a time: a buffer saves a read of the socket each.
	start := time.Now()
	in := &waitReader{r: conn}
	res, err := fs.apply(bufio.NewReaderSize(in, 256<<10))
	line := "ok " + res.String()
	switch {
	case err != nil:
		line = fmt.Sprintf("error %v; %s", err, res)
	case res.nRefused+res.nFailed > 0:
		line = "partial " + res.String()
	}
	// Where a slow sync's time went: waiting for the guest's stream, or applying it.
	line += fmt.Sprintf(" took=%s waited=%s", time.Since(start).Round(time.Millisecond), in.wait.Round(time.Millisecond))
	fmt.Fprintln(os.Stderr, "changes applied:", line)
	_, werr := io.WriteString(conn, line+"\n")
	return cmp.Or(err, werr)
}

// Apply applies one changes stream read from conn to cfg.Dir in a share server of its
// own (confined as Serve's), and returns once the server has answered on conn and
// exited; the error is the answer when the changes were not all applied (ErrApply).
// conn is closed on return.
func Apply(cfg Config, conn net.Conn, log *slog.Logger) error {
	cfg.Apply, cfg.ReadOnly = true, false
	s, err := Start(cfg, log)
	if err != nil {
		conn.Close()
		return err
	}
	if !s.take() {
		conn.Close()
		return nil
	}
	// The stream is no 9p: plain copies, the end of the guest's stream passed on, so
	// the server sees where the stream stops short.
	go func() {
		_, _ = io.Copy(s.local, conn)
		_ = s.local.(*net.UnixConn).CloseWrite()
	}()
	var answer bytes.Buffer
	_, _ = io.Copy(io.MultiWriter(conn, &limitedBuffer{b: &answer, n: 4096}), s.local)
	conn.Close()
	s.local.Close()
	s.end()
	line := strings.TrimSpace(answer.String())
	if !strings.HasPrefix(line, "ok ") {
		return fmt.Errorf("%w: %s", ErrApply, cmp.Or(line, "the server gave no answer"))
	}
	return nil
}

// ErrApply is a changes stream that was refused or applied in part.
var ErrApply = errors.New("sharefs: changes not all applied")

// waitReader adds up the time spent in r's Read.
type waitReader struct {
	r    io.Reader
	wait time.Duration
}

func (w *waitReader) Read(b []byte) (int, error) {
	t := time.Now()
	n, err := w.r.Read(b)
	w.wait += time.Since(t)
	return n, err
}

// limitedBuffer keeps the first n bytes written to it.
type limitedBuffer struct {
	b *bytes.Buffer
	n int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if k := min(len(p), l.n-l.b.Len()); k > 0 {
		l.b.Write(p[:k])
	}
	return len(p), nil
}
