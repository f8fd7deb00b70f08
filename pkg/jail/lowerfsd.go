package jail

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
)

// lowerScript runs as root of the daemon's own user and mount namespaces: a private
// mount tree, a scratch /run (virtiofsd writes a pid file there), the share bound
// read-only, then virtiofsd.
const lowerScript = `mount --make-rprivate / && mount -t tmpfs -o mode=0755 tmpfs /run &&
mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"`

// lowerIDMap maps the daemon's namespace root to nobody and host ids 0..65533 to 1..65534,
// so host files have owners the daemon's capabilities apply to: CAP_FOWNER is needed
// because overlayfs in the guest opens lower files with O_NOATIME, which the host allows
// only to the owner or CAP_FOWNER over a mapped owner. The guest sees every owner one
// higher (host root as uid 1).
var lowerIDMap = []syscall.SysProcIDMap{
	{ContainerID: 0, HostID: NobodyUID, Size: 1},
	{ContainerID: 1, HostID: 0, Size: NobodyUID},
}

// startLowerVirtiofsd serves a read-only lower of the host view (/usr, /etc, /opt) as
// nobody: a root virtiofsd would hand /etc/shadow to a guest kernel that ignores the
// masks. The daemon is root only in its own user namespace (lowerIDMap) and keeps neither
// CAP_DAC_OVERRIDE nor CAP_SETUID/CAP_SETGID, so it reads exactly what nobody can (the
// world-readable files, as QEMU's 9p does when it runs as nobody) and cannot become
// another mapped id. What it could change is refused by the read-only bind mount.
func startLowerVirtiofsd(s share, sock string, vmm *vmmIdentity, logf *os.File) (*exec.Cmd, error) {
	if _, err := os.Stat(VirtiofsdPath); err != nil {
		return nil, fmt.Errorf("virtiofsd not found at %s (Debian: apt-get install qemu-system-common): %w", VirtiofsdPath, err)
	}
	if err := qemuPathOK(s.Host); err != nil {
		return nil, err
	}
	lf, err := listenVhostSocket(sock, vmm)
	if err != nil {
		return nil, err
	}
	defer lf.Close()

	// no_new_privs first: host root is a mapped id in the namespace, so a setuid-root
	// binary (mount is one) would otherwise run as it there.
	cmd := exec.Command("setpriv", "--no-new-privs", "--", "/bin/sh", "-c", lowerScript, "sh", s.Host,
		VirtiofsdPath, "--fd=3", "--rlimit-nofile=0", "-o", "source="+s.Host, "-o", "cache=always",
		"-o", "sandbox=namespace", "-o", "no_posix_lock", "-o", "no_xattr",
		"-o", "modcaps=-chown:-dac_override:-fsetid:-setgid:-setuid:-mknod:-setfcap")
	cmd.ExtraFiles = []*os.File{lf}
	cmd.Env = vmmEnv
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Pdeathsig:   syscall.SIGKILL,
		Setpgid:     true,
		Cloneflags:  syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS,
		UidMappings: lowerIDMap,
		GidMappings: lowerIDMap,
		// Creating the namespace keeps the host uid, which is unmapped there: become its root.
		Credential: &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true},
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start virtiofsd for %s: %w", s.Host, err)
	}
	return cmd, nil
}
