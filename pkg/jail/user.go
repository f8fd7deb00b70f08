package jail

import (
	"os"
	"os/user"
	"strconv"

	"github.com/crackbox/crackbox/pkg/jail/host"
)

// invokingUser is who asked for the run: the sudo caller (SUDO_UID/SUDO_GID) when crackbox
// runs as root through sudo, else the process's own user.
func invokingUser() User {
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

// Nobody is the owner lowerfsd maps the daemon's namespace root to.
const (
	nobodyUID = 65534
	nobodyGID = 65534
)

// vmmIdentity is the uid/gid QEMU runs under.
type vmmIdentity struct {
	UID, GID uint32
	Groups   []uint32
	// PerRun: UID and GID are a uid of the run's own, claimed from the host.VMMUIDBase block
	// (vmmuid.go) when the run starts; until then they name the block's first uid.
	PerRun bool
	claim  *uidClaim
}

// vmmPlan is who runs QEMU and how the caller's shares (workdir, volumes) are served.
//
// QEMU, by how crackbox was started:
//   - unprivileged: QEMU runs as the caller.
//   - root (plain or through sudo): QEMU drops to a uid of the run's own (vmmuid.go),
//     with only /dev/kvm's group when KVM is used. It shares /usr and /opt read-only over
//     9p, so it reads only their world-readable parts. Its sockets live in a 0700
//     directory owned by that uid; kernel and initramfs reach it as inherited fds.
//
// In every mode the caller's shares (and the host view's /etc) are FSStream: served by
// pkg/jail/sharefs over the control session, one process per share running as the share's
// owner (the invoking user through sudo) without capabilities, so guest root cannot
// plant setuid files, device nodes or foreign owners on the host (sharestream.go). QEMU
// serves none of the caller's files, so it never needs to be the caller.
type vmmPlan struct {
	ID     *vmmIdentity // nil: QEMU keeps crackbox's own identity
	UserFS string       // how the caller's shares are served: FSStream (sharestream.go)
}

func pickVMM(euid int, _ User, kvmGID int) vmmPlan {
	if euid != 0 {
		return vmmPlan{UserFS: FSStream}
	}
	var groups []uint32
	if kvmGID > 0 {
		groups = []uint32{uint32(kvmGID)}
	}
	return vmmPlan{ID: perRunIdentity(groups), UserFS: FSStream}
}

// perRunIdentity is the placeholder for a uid claimed when the run starts.
func perRunIdentity(groups []uint32) *vmmIdentity {
	return &vmmIdentity{UID: host.VMMUIDBase, GID: host.VMMUIDBase, Groups: groups, PerRun: true}
}
