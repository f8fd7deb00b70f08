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

// vmmIdentity is the uid/gid QEMU runs under, or nil to keep crackbox's own.
//
// The design: as root, QEMU drops to nobody with no supplementary groups (plus the kvm
// group's gid when KVM is used). It reaches only what the run dir (owned by nobody, 0700)
// holds and the world-readable parts of /usr, /etc and /opt it shares read-only over 9p;
// it never reads /etc/shadow, /root or /home. The kernel and initramfs reach it as
// inherited file descriptors. The caller's shares (workdir, volumes) are served by one
// virtiofsd per share, running as root inside virtiofsd's own namespace sandbox, which
// creates files with the guest caller's uid/gid: files the command writes land owned by
// the invoking user (the guest runs the command as that uid). Read-only shares get a
// read-only bind mount in a private mount namespace around virtiofsd, so the host enforces
// them. Without root, QEMU runs as the caller and serves everything over 9p itself.
type vmmIdentity struct {
	UID, GID uint32
	Groups   []uint32
}

func pickVMMIdentity(euid int, kvmGID int) *vmmIdentity {
	if euid != 0 {
		return nil
	}
	id := &vmmIdentity{UID: NobodyUID, GID: NobodyGID}
	if kvmGID > 0 {
		id.Groups = []uint32{uint32(kvmGID)}
	}
	return id
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
