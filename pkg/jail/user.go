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
// The design, by how crackbox was started:
//   - unprivileged: QEMU runs as the caller and serves every share over 9p itself; it can
//     reach exactly what the caller can.
//   - root through sudo: QEMU drops to the invoking user (SUDO_UID/SUDO_GID, plus the kvm
//     group when KVM is used) and serves every share over 9p. Files the guest writes land
//     owned by that user whatever uid the guest claims, since 9p (security_model=none)
//     creates them with QEMU's own uid; no root daemon serves guest requests.
//   - plain root (the invoking user is root): QEMU drops to nobody with no supplementary
//     groups. It shares /usr, /etc and /opt read-only over 9p, so it reads only their
//     world-readable parts (never /etc/shadow, /root or /home). Its sockets live in a
//     nobody-owned 0700 directory; kernel and initramfs reach it as inherited fds. The
//     caller's shares are served by one virtiofsd per share, running as root inside its own
//     namespace sandbox (pivot_root into the share), which creates files with the guest
//     caller's uid/gid. Read-only shares get a read-only bind mount in a private mount
//     namespace around virtiofsd, so the host enforces them whatever the guest does.
//     virtiofsd runs without CAP_MKNOD, so no device nodes appear on the host. Caveat: a
//     hostile guest kernel can claim uid 0 to virtiofsd, so in this mode it can create
//     root-owned files (even setuid ones) in a read-write share; run crackbox through
//     sudo, or unprivileged, to have shares written strictly as yourself.
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
