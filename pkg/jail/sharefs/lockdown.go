package sharefs

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path"
	"runtime"
	"syscall"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/envvar"
)

// A binary that imports this package becomes the share server when started with envKey
// set (Serve re-executes /proc/self/exe). This runs before main, so crackbox, arizuko
// and test binaries all serve shares without a hook of their own.
func init() {
	v := envvar.Get(envKey)
	if v == "" {
		return
	}
	if err := helperMain(v); err != nil {
		fmt.Fprintln(os.Stderr, "crackbox share server:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperMain(v string) error {
	var hc helperConfig
	if err := json.Unmarshal([]byte(v), &hc); err != nil {
		return fmt.Errorf("bad config: %w", err)
	}
	if hc.Stage == 1 && hc.Chroot {
		runtime.LockOSThread()
		return confine(hc)
	}
	return serveLocked(hc)
}

// Securebits that keep uid 0 from regaining capabilities on exec (linux/securebits.h).
const (
	secbitNoRoot              = 1 << 0
	secbitNoRootLocked        = 1 << 1
	secbitNoSetuidFixup       = 1 << 2
	secbitNoSetuidFixupLocked = 1 << 3
	secbitKeepCapsLocked      = 1 << 5
)

// confine is stage one, run as root: chroot into the share and become its owner. For an
// owner other than root, setresuid (which the syscall package applies to every thread)
// clears every capability. Root cannot shed capabilities on all of the Go runtime's
// threads at once, so for a root-owned share this stage re-executes itself with
// securebits that keep uid 0 from regaining capabilities, keeping only CAP_SYS_CHROOT
// (ambient) for the chroot the next stage makes and then drops; the seccomp filter
// refuses chroot anyway.
func confine(hc helperConfig) error {
	if hc.UID != 0 {
		if err := enterShare(); err != nil {
			return err
		}
		if err := unix.Setgroups(nil); err != nil {
			return fmt.Errorf("setgroups: %w", err)
		}
		if err := unix.Setresgid(hc.GID, hc.GID, hc.GID); err != nil {
			return fmt.Errorf("setgid %d: %w", hc.GID, err)
		}
		if err := unix.Setresuid(hc.UID, hc.UID, hc.UID); err != nil {
			return fmt.Errorf("setuid %d: %w", hc.UID, err)
		}
		hc.Stage = 2
		return serveLocked(hc)
	}
	runtime.LockOSThread()
	if err := unix.Setgroups(nil); err != nil {
		return fmt.Errorf("setgroups: %w", err)
	}
	bits := secbitNoRoot | secbitNoRootLocked | secbitNoSetuidFixup | secbitNoSetuidFixupLocked |
		secbitKeepCapsLocked
	if err := unix.Prctl(unix.PR_SET_SECUREBITS, uintptr(bits), 0, 0, 0); err != nil {
		return fmt.Errorf("securebits: %w", err)
	}
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if c == unix.CAP_SYS_CHROOT {
			continue
		}
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	data[0].Inheritable = 1 << unix.CAP_SYS_CHROOT
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_RAISE, unix.CAP_SYS_CHROOT, 0, 0); err != nil {
		return fmt.Errorf("ambient chroot capability: %w", err)
	}
	hc.Stage = 2
	b, _ := json.Marshal(hc)
	err := syscall.Exec("/proc/self/exe", []string{"crackbox-share"}, []string{envKey + "=" + string(b)})
	return fmt.Errorf("exec: %w", err)
}

// enterShare makes the share this process's root directory.
func enterShare() error {
	if err := unix.Fchdir(dirFD); err != nil {
		return fmt.Errorf("enter share: %w", err)
	}
	if err := unix.Chroot("."); err != nil {
		return fmt.Errorf("chroot: %w", err)
	}
	return unix.Chdir("/")
}

// dropChroot is stage two of a root-owned share, and the only stage of a server in a
// user namespace of its own: chroot, then give up the one capability this thread
// holds. Runtime threads started before keep it, unusable: the filter refuses chroot.
func dropChroot() error {
	if err := enterShare(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return fmt.Errorf("clear ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	return unix.Capset(&hdr, &data[0])
}

// serveLocked is the last stage: check that no capability is left, install the seccomp
// filter, and serve 9p on connFD until the host closes it.
func serveLocked(hc helperConfig) error {
	if (hc.Chroot && hc.UID == 0) || hc.UserNS {
		runtime.LockOSThread()
		if err := dropChroot(); err != nil {
			return err
		}
	}
	if err := noCapabilities(); err != nil {
		return err
	}
	if hc.Chroot && (os.Getuid() != hc.UID || os.Getgid() != hc.GID) {
		return fmt.Errorf("running as %d:%d, want %d:%d", os.Getuid(), os.Getgid(), hc.UID, hc.GID)
	}
	// A change of credentials cleared the parent-death signal. Not dumpable: another
	// process of the same uid (the run's QEMU, for the host view) cannot trace it.
	_ = unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0)
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("not dumpable: %w", err)
	}
	unix.Umask(0)
	if err := loadFilter(); err != nil {
		return err
	}
	if afterConfine != nil {
		afterConfine()
	}
	fs := &fsys{root: dirFD, readOnly: hc.ReadOnly, hidden: map[string]bool{}}
	for _, h := range hc.Hide {
		fs.hidden[path.Clean(h)] = true
	}
	if hc.Quota > 0 {
		fs.quota = &quota{limit: hc.Quota}
	}
	go watchMemory(hc.MemLimit)
	f := os.NewFile(connFD, "share")
	conn, err := net.FileConn(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("share connection: %w", err)
	}
	if hc.Apply {
		return answerApply(fs, conn)
	}
	return p9.NewServer(attacher{fs: fs}).Handle(conn, conn)
}

// afterConfine runs in the share server once it is fully confined, before it serves.
// Only tests set it, to act as a compromised server would.
var afterConfine func()

// noCapabilities fails unless every capability set of this thread is empty.
func noCapabilities() error {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for _, d := range data {
		if d.Effective != 0 || d.Permitted != 0 || d.Inheritable != 0 {
			return fmt.Errorf("the share server still holds capabilities (%#x); refusing to serve", d.Permitted)
		}
	}
	return nil
}
