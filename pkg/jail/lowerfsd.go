package jail

import (
	"os/exec"
	"syscall"

	"github.com/crackbox/crackbox/pkg/jail/install"
)

// lowerScript runs as root of the daemon's own user and mount namespaces: a private
// mount tree, a scratch /run (virtiofsd writes a pid file there), the share bound
// read-only, then virtiofsd.
const lowerScript = `mount --make-rprivate / && mount -t tmpfs -o mode=0755 tmpfs /run && ` + roBindScript

// lowerIDMap maps the daemon's namespace root to nobody and host ids 0..65533 to 1..65534,
// so host files have owners the daemon's capabilities apply to: CAP_FOWNER is needed
// because overlayfs in the guest opens lower files with O_NOATIME, which the host allows
// only to the owner or CAP_FOWNER over a mapped owner. The guest sees every owner one
// higher (host root as uid 1).
var lowerIDMap = []syscall.SysProcIDMap{
	{ContainerID: 0, HostID: nobodyUID, Size: 1},
	{ContainerID: 1, HostID: 0, Size: nobodyUID},
}

// lowerFsdCmd serves a read-only lower of the host view (/usr, /etc, /opt) as nobody: a
// root virtiofsd would hand /etc/shadow to a guest kernel that ignores the masks. The
// daemon is root only in its own user namespace (lowerIDMap) and keeps neither
// CAP_DAC_OVERRIDE nor CAP_SETUID/CAP_SETGID, so it reads exactly what nobody can (the
// world-readable files, as QEMU's 9p does when it runs as nobody) and cannot become
// another mapped id. What it could change is refused by the read-only bind mount.
func lowerFsdCmd(s share) *exec.Cmd {
	// no_new_privs first: host root is a mapped id in the namespace, so a setuid-root
	// binary (mount is one) would otherwise run as it there.
	cmd := exec.Command("setpriv", "--no-new-privs", "--", "/bin/sh", "-c", lowerScript, "sh", s.Host,
		install.Virtiofsd, "--fd=3", "--rlimit-nofile=0", "-o", "source="+s.Host, "-o", "cache=always",
		"-o", "sandbox=namespace", "-o", "no_posix_lock", "-o", "no_xattr",
		"-o", "modcaps=-chown:-dac_override:-fsetid:-setgid:-setuid:-mknod:-setfcap")
	setFsdSysProcAttr(cmd)
	cmd.SysProcAttr.Cloneflags |= syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS
	cmd.SysProcAttr.UidMappings = lowerIDMap
	cmd.SysProcAttr.GidMappings = lowerIDMap
	// Creating the namespace keeps the host uid, which is unmapped there: become its root.
	cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0, NoSetGroups: true}
	return cmd
}
