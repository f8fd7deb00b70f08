package gated

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"syscall"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
)

// The guest wrote the parent session's state and may have made it as big as its disk
// quota allows; one fork copies at most this much on the host.
const (
	maxSessionCopy  = 64 << 20
	maxSessionFiles = 10_000
)

// ErrSessionTooBig is a fork refused because the parent's state is past the bounds.
var ErrSessionTooBig = errors.New("gated: session state too big to fork")

// copySessionState copies regular files of the parent session's directory;
// symlinks and special files written by the guest are skipped. Every access
// goes through an os.Root on the folder's home, so a symlink the guest plants
// on the way (.arizuko, sessions, the session directory) cannot lead the
// host's reads or writes out of the home. Files are streamed, never read whole,
// and a state past maxSessionCopy bytes or maxSessionFiles entries is refused
// with nothing of the child left behind.
func copySessionState(dataDir, f, from, to string) error {
	home, err := folder.Home(dataDir, f)
	if err != nil {
		return err
	}
	r, err := os.OpenRoot(home)
	if errors.Is(err, os.ErrNotExist) {
		return nil // no home yet, so no state
	}
	if err != nil {
		return err
	}
	defer r.Close()
	src := path.Join(".arizuko", "sessions", from)
	dst := path.Join(".arizuko", "sessions", to)
	if !fs.ValidPath(src) || !fs.ValidPath(dst) {
		return fmt.Errorf("session ids %q, %q: %w", from, to, ErrInvalid)
	}
	if fi, err := r.Lstat(src); err != nil || !fi.IsDir() {
		return nil // no state yet
	}
	c := &stateCopy{r: r, from: from, left: maxSessionCopy}
	err = c.dir(src, dst)
	if err != nil {
		r.RemoveAll(dst)
		if errors.Is(err, ErrSessionTooBig) {
			return fmt.Errorf("%w (at most %d MiB and %d entries)", err, maxSessionCopy>>20, maxSessionFiles)
		}
	}
	return err
}

// stateCopy is one fork's copy and what is left of its bounds.
type stateCopy struct {
	r     *os.Root
	from  string
	left  int64
	files int
}

// dir copies directory src to dst, reading src a batch of entries at a time so that a
// directory with millions of entries is refused at maxSessionFiles, not listed whole.
func (c *stateCopy) dir(src, dst string) error {
	if err := c.r.MkdirAll(dst, 0o750); err != nil {
		return err
	}
	d, err := c.r.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	defer d.Close()
	for {
		ents, err := d.ReadDir(256)
		for _, e := range ents {
			if c.files++; c.files > maxSessionFiles {
				return fmt.Errorf("session %s has over %d entries: %w", c.from, maxSessionFiles, ErrSessionTooBig)
			}
			s, t := path.Join(src, e.Name()), path.Join(dst, e.Name())
			switch {
			case e.IsDir():
				if err := c.dir(s, t); err != nil {
					return err
				}
			case e.Type().IsRegular():
				n, err := copyFileIn(c.r, s, t, c.left)
				c.left -= n
				if err != nil {
					return err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// copyFileIn streams regular file src to a new file dst, both in r, and fails with
// ErrSessionTooBig past left bytes. A file the guest swapped for something else since
// it was listed is refused rather than read: opened without following a link and
// without blocking, then checked.
func copyFileIn(r *os.Root, src, dst string, left int64) (int64, error) {
	in, err := r.OpenFile(src, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	if fi, err := in.Stat(); err != nil || !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("session file %s changed while it was copied: %w", src, ErrInvalid)
	}
	out, err := r.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(out, io.LimitReader(in, left+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil && n > left {
		err = fmt.Errorf("session state is over %d bytes: %w", int64(maxSessionCopy), ErrSessionTooBig)
	}
	return n, err
}

// removeSessionState removes session id's state from the folder's home, through an
// os.Root like every other host access to it.
func removeSessionState(dataDir, f, id string) {
	home, err := folder.Home(dataDir, f)
	if err != nil {
		return
	}
	r, err := os.OpenRoot(home)
	if err != nil {
		return
	}
	defer r.Close()
	if p := path.Join(".arizuko", "sessions", id); fs.ValidPath(p) {
		r.RemoveAll(p)
	}
}
