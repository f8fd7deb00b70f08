package main

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openAppendLog opens a log file the user named for appending. The path may lie in a
// directory an earlier guest could write (a workdir), so it is opened without following
// any symlink on the way and only as a regular file: a planted symlink or fifo would
// otherwise turn the log into a write to any file crackbox can reach, or a hang.
func openAppendLog(path string) (*os.File, error) {
	how := unix.OpenHow{
		Flags:   unix.O_WRONLY | unix.O_CREAT | unix.O_APPEND | unix.O_NONBLOCK | unix.O_NOFOLLOW | unix.O_CLOEXEC,
		Mode:    0o600,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if errors.Is(err, unix.ELOOP) {
		return nil, fmt.Errorf("%s: the path passes through a symlink; name the real file", path)
	}
	if errors.Is(err, unix.ENOSYS) {
		fd, err = unix.Open(path, int(how.Flags), 0o600)
	}
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, fmt.Errorf("%s: not a regular file; name a plain file for the log", path)
	}
	// Back to blocking writes; O_NONBLOCK only kept a fifo from hanging the open.
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), path), nil
}
