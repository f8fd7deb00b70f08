// Package hostfile opens files the operator names (--log, --env-file,
// --secret NAME=file:PATH, --allow-file, --config). Such a path may lie in a
// directory an earlier guest could write, a workdir or a share, so it is
// opened without following any symlink on the way and only as a regular
// file: a planted symlink would otherwise hand the guest, or send upstream,
// any file crackbox can read, or turn a log into a write to any file it can
// reach; a planted fifo would hang the run.
package hostfile

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// ErrSymlink is wrapped when the path passes through a symlink.
var ErrSymlink = errors.New("the path passes through a symlink, which a sandbox may have planted; name the real file (see realpath)")

// ErrNotRegular is wrapped when the path is not a regular file.
var ErrNotRegular = errors.New("not a regular file; name a plain file")

// ErrTooLarge is wrapped by ReadFile for a file past its limit.
var ErrTooLarge = errors.New("file too large")

// Open opens path for reading.
func Open(path string) (*os.File, error) {
	return open(path, unix.O_RDONLY, 0)
}

// OpenAppend opens path for appending, creating it with perm.
func OpenAppend(path string, perm os.FileMode) (*os.File, error) {
	return open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_APPEND, uint32(perm.Perm()))
}

// Create opens path for writing, creating it with perm or emptying it.
func Create(path string, perm os.FileMode) (*os.File, error) {
	return open(path, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, uint32(perm.Perm()))
}

// ReadFile reads path whole, refusing one longer than max bytes.
func ReadFile(path string, max int64) ([]byte, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (over %d bytes)", path, ErrTooLarge, max)
	}
	return b, nil
}

func open(path string, flags int, mode uint32) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   uint64(flags | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC),
		Mode:    uint64(mode),
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if errors.Is(err, unix.ENOSYS) {
		// Before Linux 5.6 only the last component can be checked.
		fd, err = unix.Open(path, int(how.Flags), mode)
	}
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: %w", path, ErrSymlink)
	}
	if errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EISDIR) {
		// A fifo without a reader, a socket, a directory opened to write.
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: %w", path, ErrNotRegular)
	}
	// Back to blocking I/O; O_NONBLOCK only kept a fifo from hanging the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}
