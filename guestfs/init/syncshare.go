package main

import (
	"archive/tar"
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
	"github.com/crackbox/crackbox/pkg/jail/guest"
)

// syncRoot holds, per share synced at exit, its read-only share (lower), the layer the
// command's writes go to (upper) and overlay's work directory, on a tmpfs of its own.
// Only root may look in.
const syncRoot = "/.crackbox-sync"

// syncWait bounds the wait for the host's answer to a changes stream.
const syncWait = 10 * time.Minute

// syncedShare is a share whose changes guest-init hands back when the command ends.
type syncedShare struct {
	tag, upper string
	ctx        context.Context // carries the control session
}

// mountSynced mounts share m read-only (9p's cache keeps what it read: the run is
// taken to be the share's only writer, so a change the host makes during the run may or
// may not be seen) under an overlay at m.Target whose upper layer is a tmpfs bounded by
// m.SyncLimit and by what the guest's memory and swap hold (upperLimit).
func mountSynced(ctx context.Context, m control.Mount, swap int64) (*syncedShare, error) {
	dir := syncRoot + "/" + m.Tag
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	data := "mode=0700,size=" + strconv.FormatInt(upperLimit(m.SyncLimit, swap), 10)
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, data); err != nil {
		return nil, fmt.Errorf("share %q: upper layer: %w", m.Tag, err)
	}
	lower, upper, work := dir+"/lower", dir+"/upper", dir+"/work"
	for _, d := range []string{lower, upper, work, m.Target} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	if err := mountAny(ctx, m, lower, true); err != nil {
		return nil, err
	}
	// The overlay's root takes the upper layer's owner and mode: the share's own.
	var st unix.Stat_t
	if err := unix.Stat(lower, &st); err != nil {
		return nil, fmt.Errorf("share %q: %w", m.Tag, err)
	}
	if err := os.Lchown(upper, int(st.Uid), int(st.Gid)); err != nil {
		return nil, err
	}
	if err := unix.Chmod(upper, st.Mode&0o7777); err != nil {
		return nil, err
	}
	// No redirects, metacopy or index: every change in the upper layer is then a whole
	// file, a directory, a symlink or a whiteout, which a changes stream can say. A
	// rename of a directory the share held fails with EXDEV, and mv copies it instead.
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",redirect_dir=off,index=off,metacopy=off"
	if err := unix.Mount("overlay", m.Target, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return nil, fmt.Errorf("overlay on %s (share %q): %w", m.Target, m.Tag, err)
	}
	return &syncedShare{tag: m.Tag, upper: upper, ctx: ctx}, nil
}

// upperLimit is the size of a synced share's upper layer: limit (the disk quota), at
// most what memory and swap hold. Three quarters of memory leaves the command room; a
// tmpfs's pages go to swap under pressure, so with the swap the host sized to the quota
// the layer holds the whole quota. The swap may come on later (swapLater).
func upperLimit(limit, swap int64) int64 {
	var si unix.Sysinfo_t
	mem := int64(256 << 20)
	if unix.Sysinfo(&si) == nil {
		mem = int64(si.Totalram) * int64(si.Unit)
	}
	if l := mem/4*3 + swap; limit <= 0 || limit > l {
		return l
	}
	return limit
}

// send hands the share's changes to the host as one stream and waits for its answer.
func (s *syncedShare) send(log *slog.Logger) error {
	// A layer with nothing in it changed nothing (the stream never holds the layer's
	// root): no stream, so the host starts no server to apply it.
	if ents, err := os.ReadDir(s.upper); err == nil && len(ents) == 0 {
		log.Info("share synced", "share", s.tag, "answer", "unchanged")
		return nil
	}
	c, err := guest.OpenStream(s.ctx, control.KindSync+s.tag)
	if err != nil {
		return fmt.Errorf("share %q: open sync stream: %w", s.tag, err)
	}
	defer c.Close()
	start := time.Now()
	wrote := make(chan error, 1)
	var sent countWriter
	var sentTook time.Duration
	go func() {
		sent.w = c
		bw := bufio.NewWriterSize(&sent, 256<<10)
		err := writeChanges(bw, s.upper)
		if err == nil {
			err = bw.Flush()
		}
		_ = control.CloseWrite(c)
		sentTook = time.Since(start)
		wrote <- err
	}()
	_ = c.SetReadDeadline(time.Now().Add(syncWait))
	line, rerr := bufio.NewReader(c).ReadString('\n')
	werr := <-wrote
	line = strings.TrimSpace(line)
	// sent is the layer read and written out (the host applies as it reads); the rest of
	// took is the host's apply after the stream's end.
	log.Info("share synced", "share", s.tag, "answer", line, "bytes", sent.n,
		"sent", sentTook.Round(time.Millisecond), "took", time.Since(start).Round(time.Millisecond))
	switch {
	case rerr != nil:
		return fmt.Errorf("share %q: no answer to its changes: %w", s.tag, rerr)
	case !strings.HasPrefix(line, "ok"):
		return fmt.Errorf("share %q: changes not all applied: %s", s.tag, line)
	}
	return werr
}

// writeChanges writes the upper layer at upper as a changes stream (control.KindSync's format):
// each directory before what it holds, an opaque directory marked so, a whiteout as a
// removal. Whatever else the layer holds is sent as what it is, for the host to refuse.
func writeChanges(w io.Writer, upper string) error {
	tw := tar.NewWriter(w)
	buf := make([]byte, 256<<10) // one for every file: a layer holds thousands
	err := filepath.WalkDir(upper, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed by a process still running: gone from the changes too
		}
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(upper, p)
		if rel == "." {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); errors.Is(err, unix.ENOENT) {
			return nil
		} else if err != nil {
			return err
		}
		hdr := &tar.Header{Name: rel, Mode: int64(st.Mode & 0o7777), ModTime: time.Unix(st.Mtim.Unix())}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			hdr.Typeflag = tar.TypeDir
			if opaque(p) {
				hdr.PAXRecords = map[string]string{control.SyncOpaque: "y"}
			}
		case unix.S_IFCHR:
			if st.Rdev == 0 { // overlay's whiteout
				hdr.Typeflag, hdr.Mode = tar.TypeReg, 0
				hdr.PAXRecords = map[string]string{control.SyncRemove: "1"}
				break
			}
			hdr.Typeflag = tar.TypeChar
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFBLK:
			hdr.Typeflag = tar.TypeBlock
			hdr.Devmajor, hdr.Devminor = int64(unix.Major(st.Rdev)), int64(unix.Minor(st.Rdev))
		case unix.S_IFIFO:
			hdr.Typeflag = tar.TypeFifo
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case unix.S_IFREG:
			return writeFile(tw, hdr, p, st.Size, buf)
		default:
			return nil // a socket: nothing to hand back
		}
		return tw.WriteHeader(hdr)
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// writeFile writes the regular file at p, of size bytes when it was looked at, through
// buf. A file that changes size while it is read (a process still running) is sent at
// the size its header says.
func writeFile(tw *tar.Writer, hdr *tar.Header, p string, size int64, buf []byte) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	} else if err != nil {
		return &fs.PathError{Op: "open", Path: p, Err: err}
	}
	defer unix.Close(fd)
	hdr.Typeflag, hdr.Size = tar.TypeReg, size
	if err := tw.WriteHeader(hdr); err != nil {
		return err
	}
	// A plain fd, read straight into buf: no *os.File, no copy buffer per file.
	for left := size; left > 0; {
		n, err := unix.Read(fd, buf[:min(int64(len(buf)), left)])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return &fs.PathError{Op: "read", Path: p, Err: err}
		}
		if n == 0 { // shorter than when it was looked at
			_, err := io.CopyBuffer(tw, io.LimitReader(zeros{}, left), buf)
			return err
		}
		if _, err := tw.Write(buf[:n]); err != nil {
			return err
		}
		left -= int64(n)
	}
	return nil
}

// opaque reports whether overlay marked the directory at p as hiding the lower one.
func opaque(p string) bool {
	buf := make([]byte, 8)
	n, err := unix.Lgetxattr(p, "trusted.overlay.opaque", buf)
	return err == nil && n == 1 && buf[0] == 'y'
}

// countWriter counts what passes through it to w.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

type zeros struct{}

func (zeros) Read(b []byte) (int, error) {
	clear(b)
	return len(b), nil
}
