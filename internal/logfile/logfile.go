// Package logfile is an append-only log file with a size cap: a write that
// would take it past the cap first renames it to name.1 (replacing the one
// before) and starts afresh, so a log a sandbox can fill at will holds at
// most twice the cap on disk and keeps the newest lines.
package logfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/crackbox/crackbox/internal/hostfile"
)

// File is a capped log file; it is safe for concurrent use. Each Write is
// kept whole in one file, so line-oriented writers never see a line split.
type File struct {
	path string
	max  int64
	perm os.FileMode

	mu   sync.Mutex
	f    *os.File
	size int64
}

// Open opens (or creates) path for appending, capped at max bytes (max > 0).
func Open(path string, max int64, perm os.FileMode) (*File, error) {
	if max <= 0 {
		return nil, fmt.Errorf("logfile %s: cap %d must be positive", path, max)
	}
	l := &File{path: path, max: max, perm: perm}
	if err := l.open(); err != nil {
		return nil, err
	}
	return l, nil
}

// open goes through hostfile: the log may lie in a directory a sandbox can
// write, which could hold a symlink or a fifo in its place.
func (l *File) open() error {
	f, err := hostfile.OpenAppend(l.path, l.perm)
	if err != nil {
		return fmt.Errorf("logfile: %w", err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("logfile: %w", err)
	}
	l.f, l.size = f, st.Size()
	return nil
}

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("logfile: closed")

// Write appends b, rotating first if b would take the file past its cap.
func (l *File) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, ErrClosed
	}
	if l.size > 0 && l.size+int64(len(b)) > l.max {
		if err := l.rotate(); err != nil {
			return 0, err
		}
	}
	n, err := l.f.Write(b)
	l.size += int64(n)
	return n, err
}

func (l *File) rotate() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("logfile: %w", err)
	}
	l.f = nil
	if err := os.Rename(l.path, l.path+".1"); err != nil {
		return fmt.Errorf("logfile: rotate: %w", err)
	}
	return l.open()
}

// Close closes the file; later writes fail with ErrClosed.
func (l *File) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// Tail returns up to n bytes from the end of the log at path, reading only
// those: it starts in path.1 when path alone holds fewer, so a log that has
// just rotated still shows its newest n bytes. A missing or unsafe file reads
// as empty.
func Tail(path string, n int64) string {
	cur := tail(path, n)
	if int64(len(cur)) >= n {
		return string(cur)
	}
	return string(tail(path+".1", n-int64(len(cur)))) + string(cur)
}

func tail(path string, n int64) []byte {
	f, err := hostfile.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(0, st.Size()-n)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	return b
}
