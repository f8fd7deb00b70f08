package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// The VMM jail, shaped after Firecracker's jailer: QEMU starts through a launcher (this
// binary re-executed as vmmLauncherName, see vmmjail_child.go) in new mount, pid, ipc,
// uts and network namespaces. The launcher joins the run's cgroup leaf, builds a
// minimal root on a tmpfs (/usr and the shares QEMU serves read-only or as asked, its
// socket dir, a few device nodes, a private /proc), pivots into it, drops to QEMU's
// uid with no_new_privs and execs QEMU with a minimal environment. QEMU's own -sandbox
// seccomp policy then applies. QEMU needs no network: the tap is an inherited fd.

// vmmJailOff starts QEMU without the namespaces and cgroup; only the benchmark that
// measures what the jail costs sets it.
var vmmJailOff bool

// vmmLauncherName is argv[0] of the launcher process; init() in vmmjail_child.go acts on it.
const vmmLauncherName = "crackbox-vmm-jail"

// vmmEnv is the whole environment of QEMU and its helpers: none of crackbox's (the
// guest's -e values, tokens, proxy settings) reaches them.
var vmmEnv = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}

// jailBind is a host path visible at the same path inside the jail.
type jailBind struct {
	Path string `json:"path"`
	RW   bool   `json:"rw,omitempty"`
}

// jailConfig is what the launcher is told, as JSON in argv[1].
type jailConfig struct {
	Root    string      `json:"root"` // an empty directory the new root is mounted on
	Binds   []jailBind  `json:"binds"`
	Devices []string    `json:"devices"`
	Links   [][2]string `json:"links"` // path, target: the host's merged-/usr symlinks
	Procs   []string    `json:"procs"` // cgroup.procs files to join
	SetID   bool        `json:"setid"`
	UID     uint32      `json:"uid"`
	GID     uint32      `json:"gid"`
	Groups  []uint32    `json:"groups"`
}

// vmmJail is how one VMM process is confined.
type vmmJail struct {
	cfg jailConfig
	// newNet: a network namespace of its own (false only when QEMU must open a tap by name).
	newNet bool
}

// ErrNoVMMJail means QEMU starts without the namespace jail: crackbox is unprivileged.
// A user namespace could build the view, but QEMU serves /usr, /etc and /opt to the
// guest over 9p and would then report every file not owned by the caller as owned by
// the overflow uid.
var ErrNoVMMJail = errors.New("jail: crackbox is unprivileged, so QEMU runs as the caller without its own namespaces or mount view")

// newVMMJail prepares a jail rooted at root (an empty dir is made there) for a process
// running as id (nil: crackbox's own user) in leaf (nil: no cgroup).
func newVMMJail(root string, id *vmmIdentity, leaf *cgroupLeaf) (*vmmJail, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNoVMMJail
	}
	// The directory is only a mount point in the launcher's private mount namespace.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("vmm jail root: %w", err)
	}
	j := &vmmJail{newNet: true}
	j.cfg.Root = root
	j.cfg.Procs = leaf.procsFiles()
	if id != nil {
		j.cfg.SetID, j.cfg.UID, j.cfg.GID, j.cfg.Groups = true, id.UID, id.GID, id.Groups
	}
	j.bind("/usr", false)
	// The loader's cache names the multiarch library dirs; without it QEMU's libraries
	// are not found under /usr/lib/<triplet>.
	j.bind("/etc/ld.so.cache", false)
	for _, n := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if t, err := os.Readlink(n); err == nil {
			j.cfg.Links = append(j.cfg.Links, [2]string{n, t})
		} else if fi, err := os.Stat(n); err == nil && fi.IsDir() {
			j.bind(n, false)
		}
	}
	for _, d := range []string{"/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom"} {
		j.device(d)
	}
	return j, nil
}

// bind makes path visible in the jail; a path that does not exist is skipped.
func (j *vmmJail) bind(path string, rw bool) {
	if _, err := os.Stat(path); err != nil {
		return
	}
	for i, b := range j.cfg.Binds {
		if b.Path == path {
			j.cfg.Binds[i].RW = b.RW || rw
			return
		}
	}
	j.cfg.Binds = append(j.cfg.Binds, jailBind{Path: path, RW: rw})
}

func (j *vmmJail) device(path string) {
	if _, err := os.Stat(path); err == nil {
		j.cfg.Devices = append(j.cfg.Devices, path)
	}
}

// command is an exec.Cmd that runs bin with args inside the jail. The caller sets its
// stdio and ExtraFiles and may add to SysProcAttr; Setpgid and Pdeathsig are set.
func (j *vmmJail) command(bin string, args ...string) (*exec.Cmd, error) {
	cfg, err := json.Marshal(j.cfg)
	if err != nil {
		return nil, err
	}
	if !filepath.IsAbs(bin) {
		return nil, fmt.Errorf("vmm jail: %s: need an absolute path", bin)
	}
	cmd := &exec.Cmd{
		Path: "/proc/self/exe",
		Args: append([]string{vmmLauncherName, string(cfg), bin}, args...),
		Env:  vmmEnv,
		Dir:  "/",
	}
	flags := uintptr(syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS)
	if j.newNet {
		flags |= syscall.CLONE_NEWNET
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true, Cloneflags: flags}
	return cmd, nil
}

// qemuCommand is the exec.Cmd that starts QEMU for a run: through the jail when crackbox
// is root, else directly (as the caller, with the same minimal environment).
func qemuCommand(st vmStart, cfg vmConfig, rd *runDir, args []string) (*exec.Cmd, error) {
	j, err := newVMMJail(rd.path("root"), st.vmm, st.leaf)
	if errors.Is(err, ErrNoVMMJail) || (err == nil && vmmJailOff) {
		cmd := exec.Command(st.qemu, args...)
		cmd.Env = vmmEnv
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
		if st.vmm != nil && os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: st.vmm.UID, Gid: st.vmm.GID, Groups: st.vmm.Groups}
		}
		return cmd, nil
	}
	if err != nil {
		return nil, err
	}
	j.bind(rd.VM, true)
	for _, s := range cfg.Shares {
		if s.FS != FSVirtiofs {
			j.bind(s.Host, !s.ReadOnly)
		}
	}
	if st.accel == AccelKVM {
		j.device(KVMDevice)
	}
	if cfg.TapName != "" {
		// QEMU opens the tap by name, which only works in the host's network namespace.
		j.newNet = false
		j.device("/dev/net/tun")
	}
	return j.command(st.qemu, args...)
}

// vmmConfinement makes the run's cgroup leaf and says, in one warning, what the VMM runs
// without when the host cannot confine it fully.
func vmmConfinement(runID string, p *plan, euid int, log *slog.Logger) *cgroupLeaf {
	var missing []string
	var leaf *cgroupLeaf
	if vmmJailOff {
		return nil
	}
	if euid != 0 {
		_, err := CgroupSupportFor(euid)
		missing = append(missing, ErrNoVMMJail.Error(), err.Error())
	} else if l, err := newCgroupLeaf(runID, vmmLimits(p.memMiB, p.cpus)); err != nil {
		missing = append(missing, err.Error())
	} else {
		leaf = l
	}
	if len(missing) > 0 {
		log.Warn("vmm not fully confined", "why", strings.Join(missing, "; "))
	}
	return leaf
}
