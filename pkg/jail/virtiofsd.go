package jail

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"syscall"

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// roBindScript binds the share ($1) read-only over itself, then execs the rest of its
// arguments, so writes fail on the host side whatever the guest does.
const roBindScript = `mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"`

// fsdCmd builds the virtiofsd command line (and its namespaces) for one share; the
// daemon is handed its listening socket as fd 3.
type fsdCmd func(s share) *exec.Cmd

// startVirtiofsd serves one share on a vhost-user socket at sock, which QEMU (running as
// vmm) connects to, with the daemon build makes. crackbox creates and listens on the
// socket itself and hands the listening fd over, so the socket's owner and mode are set
// before anyone can reach it.
func startVirtiofsd(s share, sock string, vmm *vmmIdentity, logf *os.File, build fsdCmd) (*exec.Cmd, error) {
	if _, err := os.Stat(install.Virtiofsd); err != nil {
		return nil, fmt.Errorf("virtiofsd not found at %s (Debian: apt-get install qemu-system-common): %w", install.Virtiofsd, err)
	}
	if err := qemuPathOK(s.Host); err != nil {
		return nil, err
	}
	lf, err := listenVhostSocket(sock, vmm)
	if err != nil {
		return nil, err
	}
	defer lf.Close()

	cmd := build(s)
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Env = vmmEnv
	cmd.Stdout = logf
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start virtiofsd for %s: %w", s.Host, err)
	}
	return cmd, nil
}

// setFsdSysProcAttr sets what every virtiofsd runs with: killed with crackbox, in its own
// process group, and (virtiofsd's own sandbox adds mount, pid and network namespaces)
// new ipc and uts namespaces.
func setFsdSysProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS}
	proc.Tie(cmd, syscall.SIGKILL)
}

// shareFsdCmd serves a user share as the host user crackbox runs as. A read-only share
// is bind-mounted read-only in a private mount namespace first.
func shareFsdCmd(s share) *exec.Cmd {
	fsd := []string{install.Virtiofsd, "--fd=3", "-o", "source=" + s.Host, "-o", "cache=auto",
		"-o", "sandbox=namespace", "-o", "no_posix_lock", "-o", "no_xattr",
		// No device nodes: a hostile guest could otherwise plant e.g. a world-writable
		// block device node in a host directory.
		"-o", "modcaps=-mknod"}
	var cmd *exec.Cmd
	if s.ReadOnly {
		args := append([]string{"--mount", "--propagation", "private", "--", "/bin/sh", "-c", roBindScript, "sh", s.Host}, fsd...)
		cmd = exec.Command("unshare", args...)
	} else {
		cmd = exec.Command(fsd[0], fsd[1:]...)
	}
	setFsdSysProcAttr(cmd)
	return cmd
}

// listenVhostSocket creates the vhost-user socket a virtiofsd serves, owned by QEMU's uid
// before anyone can reach it, and returns the listening fd to hand to the daemon.
func listenVhostSocket(sock string, vmm *vmmIdentity) (*os.File, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("virtiofsd socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if vmm != nil {
		if err := os.Chown(sock, int(vmm.UID), int(vmm.GID)); err != nil {
			return nil, fmt.Errorf("virtiofsd socket: %w", err)
		}
	}
	return l.File()
}
