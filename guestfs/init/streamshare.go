package main

import (
	"context"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"

	relaypkg "github.com/crackbox/crackbox/internal/relay"
	"github.com/crackbox/crackbox/pkg/jail/control"
	"github.com/crackbox/crackbox/pkg/jail/guest"
)

// fsStream is a share served by crackbox's own 9p server over a control stream
// (pkg/jail/sharefs) instead of a QEMU device: the host serves it as the directory's owner,
// and nothing about it is VM state, so a guest restored from a snapshot mounts it too.
const fsStream = "9p-stream"

// mountStream mounts share m at target with 9p's fd transport. A share with a port of
// its own is mounted on the port itself, so its round trips never leave the kernel; a
// kernel whose ports cannot serve that gets a socket pair relayed to the port, and a
// share without a port a socket pair relayed to a stream of the control session.
func mountStream(ctx context.Context, m control.Mount, target string, readOnly bool) error {
	if m.Port != "" {
		port, err := openSharePort(m.Port)
		if err != nil {
			return fmt.Errorf("share %q: %w", m.Tag, err)
		}
		err = mount9p(m.Tag, target, port, readOnly)
		unix.Close(port) // the mount holds its own reference
		if err == nil {
			return nil
		}
		// A kernel without the port patch (guestfs/kernel) fails the mount at once,
		// before anything reached the port; the relay below serves it.
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("share %q: socketpair: %w", m.Tag, err)
	}
	if m.Port != "" {
		port, err := openSharePort(m.Port)
		if err != nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
			return fmt.Errorf("share %q: %w", m.Tag, err)
		}
		go relayPort(fds[1], port)
	} else {
		c, err := guest.OpenStream(ctx, control.KindShare+m.Tag)
		if err != nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
			return fmt.Errorf("share %q: open stream: %w", m.Tag, err)
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
	}
	err = mount9p(m.Tag, target, fds[0], readOnly)
	// The mount holds its own reference to the socket; closing ours also ends the relay
	// of a mount that failed.
	unix.Close(fds[0])
	return err
}

// mount9p mounts the share served over fd at target.
func mount9p(tag, target string, fd int, readOnly bool) error {
	flags := uintptr(unix.MS_NOSUID | unix.MS_NODEV)
	if readOnly {
		flags |= unix.MS_RDONLY
	}
	data := fmt.Sprintf("trans=fd,rfdno=%d,wfdno=%d,version=9p2000.L,msize=%d,access=client,%s",
		fd, fd, shareMsize, shareCache(readOnly))
	if err := unix.Mount("crackbox-"+tag, target, "9p", flags, data); err != nil {
		return fmt.Errorf("mount share %q on %s: %w", tag, target, err)
	}
	return nil
}

// relay copies between the mount's socket and the host stream until either ends; 9p
// has no half-close, so one side ending means the mount is gone and both are closed.
func relay(a, b net.Conn) {
	relaypkg.Copy(context.Background(), a, b, relaypkg.CloseBoth)
}
