package jail

import (
	"os"
	"os/user"
	"strconv"
)

// InvokingUser is who asked for the run: the sudo caller (SUDO_UID/SUDO_GID) when crackbox
// runs as root through sudo, else the process's own user.
func InvokingUser() User {
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		su, e1 := strconv.Atoi(os.Getenv("SUDO_UID"))
		sg, e2 := strconv.Atoi(os.Getenv("SUDO_GID"))
		if e1 == nil && e2 == nil && su > 0 {
			uid, gid = su, sg
		}
	}
	u := User{UID: uid, GID: gid}
	if pw, err := user.LookupId(strconv.Itoa(uid)); err == nil && pw.HomeDir != "" {
		u.Home = pw.HomeDir
	} else if uid == os.Getuid() {
		u.Home = os.Getenv("HOME")
	}
	if u.Home == "" {
		if uid == 0 {
			u.Home = "/root"
		} else {
			u.Home = "/home/" + strconv.Itoa(uid)
		}
	}
	return u
}

// Nobody is the identity QEMU runs as when crackbox runs as root.
const (
	NobodyUID = 65534
	NobodyGID = 65534
)

// vmmIdentity is the uid/gid QEMU runs under.
type vmmIdentity struct {
	UID, GID uint32
	Groups   []uint32
}

// vmmPlan is who runs QEMU and how the caller's shares (workdir, volumes) are served.
//
// QEMU, by how crackbox was started:
//   - unprivileged: QEMU runs as the caller.
//   - root through sudo: QEMU drops to the invoking user (SUDO_UID/SUDO_GID, plus the kvm
//     group when KVM is used).
//   - plain root (the invoking user is root): QEMU drops to nobody with no supplementary
//     groups. It shares /usr and /opt read-only over 9p, so it reads only their
//     world-readable parts. Its sockets live in a nobody-owned 0700 directory; kernel and
//     initramfs reach it as inherited fds.
//
// In every mode the caller's shares (and the host view's /etc) are FSStream: served by
// pkg/sharefs over the control session, one process per share running as the share's
// owner (the invoking user through sudo) without capabilities, so guest root cannot
// plant setuid files, device nodes or foreign owners on the host (sharestream.go).
type vmmPlan struct {
	ID     *vmmIdentity // nil: QEMU keeps crackbox's own identity
	UserFS string       // how the caller's shares are served: FSStream (sharestream.go)
}

func pickVMM(euid int, inv User, kvmGID int) vmmPlan {
	if euid != 0 {
		return vmmPlan{UserFS: FSStream}
	}
	var groups []uint32
	if kvmGID > 0 {
		groups = []uint32{uint32(kvmGID)}
	}
	if inv.UID != 0 {
		return vmmPlan{ID: &vmmIdentity{UID: uint32(inv.UID), GID: uint32(inv.GID), Groups: groups}, UserFS: FSStream}
	}
	return vmmPlan{ID: &vmmIdentity{UID: NobodyUID, GID: NobodyGID, Groups: groups}, UserFS: FSStream}
}

func kvmGroupID() int {
	g, err := user.LookupGroup("kvm")
	if err != nil {
		return -1
	}
	n, err := strconv.Atoi(g.Gid)
	if err != nil {
		return -1
	}
	return n
}
