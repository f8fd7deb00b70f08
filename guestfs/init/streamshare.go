package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/control"
	"github.com/crackbox/crackbox/pkg/guest"
)

// fsStream is a share served by crackbox's own 9p server over a control stream
// (pkg/sharefs) instead of a QEMU device: the host serves it as the directory's owner,
// and nothing about it is VM state, so a guest restored from a snapshot mounts it too.
const fsStream = "9p-stream"

// mountStream mounts share m at target with 9p's fd transport over one end of a socket
// pair; guest-init copies the other end to and from the host's stream for the rest of
// the run.
func mountStream(ctx context.Context, m control.Mount, target string, readOnly bool) error {
	c, err := guest.OpenStream(ctx, control.KindShare+m.Tag)
	if err != nil {
		return fmt.Errorf("share %q: open stream: %w", m.Tag, err)
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.Close()
		return fmt.Errorf("share %q: socketpair: %w", m.Tag, err)
	}
	f := os.NewFile(uintptr(fds[1]), "share")
	local, err := net.FileConn(f)
	f.Close()
	if err != nil {
		unix.Close(fds[0])
		c.Close()
		return fmt.Errorf("share %q: %w", m.Tag, err)
	}
	go relay(local, c)
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	data := fmt.Sprintf("trans=fd,rfdno=%d,wfdno=%d,version=9p2000.L,msize=262144,access=client", fds[0], fds[0])
	if readOnly {
		// As for the device lowers: a read-only share does not change under the run.
		data += ",cache=loose"
	}
	err = unix.Mount("crackbox-"+m.Tag, target, "9p", flags, data)
	// The mount holds its own reference to the socket.
	unix.Close(fds[0])
	if err != nil {
		local.Close()
		return fmt.Errorf("mount share %q on %s: %w", m.Tag, target, err)
	}
	return nil
}

// relay copies between the mount's socket and the host stream until either ends.
func relay(a, b net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(a, b); done <- struct{}{} }()
	go func() { _, _ = io.Copy(b, a); done <- struct{}{} }()
	<-done
	a.Close()
	b.Close()
}
