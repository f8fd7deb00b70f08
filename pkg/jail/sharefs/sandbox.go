package sharefs

import (
	"errors"
	"os/exec"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// hostNS are the namespaces a share server leaves: with its own network namespace (a
// loopback that is down and nothing else) it cannot reach the host's loopback services
// even if the filter let it make a socket, and with its own PID namespace it is pid 1
// and sees no host process to signal or trace.
const hostNS = unix.CLONE_NEWNET | unix.CLONE_NEWPID | unix.CLONE_NEWIPC | unix.CLONE_NEWUTS

// sandbox sets how cmd leaves the host's namespaces. As root the server needs no user
// namespace: it drops to the share's owner itself. Unprivileged (hc.UserNS) it gets a
// user namespace that maps only its own uid and gid, which is what lets it make the
// other namespaces and chroot into the share (with CAP_SYS_CHROOT, ambient, in that
// namespace only).
func sandbox(cmd *exec.Cmd, hc helperConfig) {
	attr := cmd.SysProcAttr
	attr.Cloneflags = hostNS
	if !hc.UserNS {
		return
	}
	attr.Cloneflags |= unix.CLONE_NEWUSER
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: hc.UID, HostID: hc.UID, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: hc.GID, HostID: hc.GID, Size: 1}}
	attr.GidMappingsEnableSetgroups = false
	attr.AmbientCaps = []uintptr{unix.CAP_SYS_CHROOT}
}

// nsRefused reports whether err is the kernel refusing the namespaces: unprivileged user
// namespaces disabled by sysctl or a security module, a container without the
// capability, or the namespace limit reached.
func nsRefused(err error) bool {
	return errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.EINVAL) ||
		errors.Is(err, unix.ENOSPC) || errors.Is(err, unix.EUSERS)
}

// nsWarned makes the warning about a server left in the host's namespaces once per
// process: every share of every run would repeat it.
var nsWarned sync.Once
