package jail

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/pkg/jail/host"
)

// The VMM jail, shaped after Firecracker's jailer: QEMU starts in new mount, pid, ipc,
// uts and network namespaces, on a minimal root on a tmpfs (/usr and the shares QEMU
// serves read-only or as asked, its socket dir, a few device nodes, a /proc showing its
// own processes only), in the run's cgroup leaf, as QEMU's uid with no_new_privs and a
// minimal environment. QEMU's own -sandbox seccomp policy then applies. QEMU needs no
// network: the tap is an inherited fd. The view is built on a locked OS thread of
// crackbox that QEMU is forked from (vmmjail_view.go), so no launcher process runs
// between crackbox and QEMU.

// vmmJailOff starts QEMU without the namespaces and cgroup; only the benchmark that
// measures what the jail costs sets it.
var vmmJailOff bool

// vmmEnv is the whole environment of QEMU and its helpers: none of crackbox's (the
// guest's -e values, tokens, proxy settings) reaches them.
var vmmEnv = []string{"PATH=/usr/bin:/bin", "LC_ALL=C"}

// jailBind is a host path visible at the same path inside the jail.
type jailBind struct {
	Path string
	RW   bool
}

// jailConfig is the view and identity of one jailed process.
type jailConfig struct {
	Root    string // an empty directory the new root is mounted on
	Binds   []jailBind
	Devices []string
	Links   [][2]string // path, target: the host's merged-/usr symlinks
	// CgroupDir is the v2 leaf the process is cloned into; Tasks and HomeTasks are the
	// v1 leaf's and crackbox's own tasks files, which the forking thread joins and leaves.
	CgroupDir        string
	Tasks, HomeTasks []string
	SetID            bool
	UID, GID         uint32
	Groups           []uint32
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
	// The directory is only a mount point in the jail thread's private mount namespace.
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("vmm jail root: %w", err)
	}
	j := &vmmJail{newNet: true}
	j.cfg.Root = root
	j.cfg.CgroupDir, j.cfg.Tasks, j.cfg.HomeTasks = leaf.joinPaths()
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

// bindPrefix makes a program installed outside /usr visible with what it loads: the
// install prefix of <prefix>/bin/name (its lib/ and share/ hold QEMU's libraries and
// firmware), or the file alone where it sits elsewhere.
func (j *vmmJail) bindPrefix(bin string) {
	if strings.HasPrefix(bin, "/usr/") {
		return
	}
	dir := filepath.Dir(bin)
	if prefix := filepath.Dir(dir); filepath.Base(dir) == "bin" && prefix != "/" && !strings.HasPrefix(prefix, "/home") && prefix != "/root" {
		j.bind(prefix, false)
		return
	}
	j.bind(bin, false)
}

func (j *vmmJail) device(path string) {
	if _, err := os.Stat(path); err == nil {
		j.cfg.Devices = append(j.cfg.Devices, path)
	}
}

// command is an exec.Cmd that runs bin with args inside the jail once started with
// start. The caller sets its stdio and ExtraFiles.
func (j *vmmJail) command(bin string, args ...string) (*exec.Cmd, error) {
	if !filepath.IsAbs(bin) {
		return nil, fmt.Errorf("vmm jail: %s: need an absolute path", bin)
	}
	cmd := &exec.Cmd{Path: bin, Args: append([]string{bin}, args...), Env: vmmEnv, Dir: "/"}
	flags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWIPC)
	if j.newNet {
		flags |= syscall.CLONE_NEWNET
	}
	// Go's child sets the parent-death signal after the credentials, which would clear it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	proc.Tie(cmd, syscall.SIGKILL)
	if j.cfg.SetID {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: j.cfg.UID, Gid: j.cfg.GID, Groups: j.cfg.Groups}
	}
	return cmd, nil
}

// start starts cmd from a thread that has entered the jail. release must be called once
// cmd.Wait has returned: the thread lives until then, because the parent-death signal
// fires when the forking thread ends, not crackbox.
func (j *vmmJail) start(cmd *exec.Cmd) (release func(), err error) {
	var dir *os.File
	if j.cfg.CgroupDir != "" {
		if dir, err = os.Open(j.cfg.CgroupDir); err != nil {
			return nil, fmt.Errorf("vmm cgroup: %w", err)
		}
		defer dir.Close()
		cmd.SysProcAttr.UseCgroupFD, cmd.SysProcAttr.CgroupFD = true, int(dir.Fd())
	}
	started, done := make(chan error, 1), make(chan struct{})
	lockedOffMain(func() {
		leave, err := j.fork(cmd)
		started <- err
		if err != nil {
			return
		}
		// Off the start's path: moving a thread between v1 cgroups waits for an RCU grace
		// period. A thread of crackbox left in the leaf would make the leaf's limits, and
		// its removal (which kills what it holds), crackbox's own: QEMU is ended instead,
		// saying why in its log.
		if err := leave(); err != nil {
			if cmd.Stderr != nil {
				fmt.Fprintf(cmd.Stderr, "vmm jail: %v\n", err)
			}
			_ = cmd.Process.Kill()
		}
		<-done
	})
	if err := <-started; err != nil {
		return nil, fmt.Errorf("vmm jail: %w", err)
	}
	var once sync.Once
	return func() { once.Do(func() { close(done) }) }, nil
}

// fork enters the jail on the calling (locked) thread and starts cmd from it; leave
// takes the thread back out of the run's v1 cgroup leaf.
func (j *vmmJail) fork(cmd *exec.Cmd) (leave func() error, err error) {
	join, leave, err := enterJail(j.cfg)
	if err != nil {
		return nil, err
	}
	if err := join(); err != nil {
		leave()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		leave()
		return nil, err
	}
	return leave, nil
}

// lockedOffMain runs f in a goroutine locked to a thread other than the process's main
// one and never unlocks it, so the thread ends with f. The runtime never ends the main
// thread: it parks it, and jail state made there would outlive the run in the thread
// the kernel charges the process's memory to.
func lockedOffMain(f func()) {
	go func() {
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			f()
			return
		}
		// The main thread stays locked to this goroutine until the other has locked a
		// thread of its own, so that one cannot be the main thread.
		locked := make(chan struct{})
		go func() {
			runtime.LockOSThread()
			close(locked)
			f()
		}()
		<-locked
		runtime.UnlockOSThread()
	}()
}

// startVMM starts cmd, in j unless j is nil; release is as for vmmJail.start.
func startVMM(cmd *exec.Cmd, j *vmmJail) (release func(), err error) {
	if j == nil {
		return func() {}, cmd.Start()
	}
	return j.start(cmd)
}

// qemuCommand is the exec.Cmd that starts QEMU for a run and the jail to start it in
// (startVMM): the jail when crackbox is root, else none (QEMU runs as the caller, with the
// same minimal environment).
func qemuCommand(st vmStart, cfg vmConfig, rd *runDir, args []string) (*exec.Cmd, *vmmJail, error) {
	j, err := newVMMJail(rd.path("root"), st.vmm, st.leaf)
	if errors.Is(err, ErrNoVMMJail) || (err == nil && vmmJailOff) {
		cmd := exec.Command(st.qemu, args...)
		cmd.Env = vmmEnv
		proc.Tie(cmd, syscall.SIGKILL)
		if st.vmm != nil && os.Geteuid() == 0 {
			cmd.SysProcAttr.Credential = &syscall.Credential{Uid: st.vmm.UID, Gid: st.vmm.GID, Groups: st.vmm.Groups}
		}
		return cmd, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	j.bind(rd.VM, true)
	qemu, err := filepath.EvalSymlinks(st.qemu)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: qemu %s: %w", ErrNoQEMU, st.qemu, err)
	}
	j.bindPrefix(qemu)
	for _, s := range cfg.Shares {
		if s.FS != FSVirtiofs {
			j.bind(s.Host, !s.ReadOnly)
		}
	}
	if st.accel == AccelKVM {
		j.device(host.KVMDevice)
	}
	if cfg.TapName != "" {
		// QEMU opens the tap by name, which only works in the host's network namespace.
		j.newNet = false
		j.device("/dev/net/tun")
	}
	cmd, err := j.command(qemu, args...)
	return cmd, j, err
}

// vmmConfinement makes the run's cgroup leaf and returns, as one host note, what the VMM
// runs without when the host cannot confine it fully.
func vmmConfinement(runID string, p *plan, euid int) (*cgroupLeaf, *HostNote) {
	var missing []string
	var leaf *cgroupLeaf
	if vmmJailOff {
		return nil, nil
	}
	if euid != 0 {
		_, err := host.CgroupSupport(euid)
		missing = append(missing, ErrNoVMMJail.Error(), err.Error())
	} else if l, err := newCgroupLeaf(runID, vmmLimits(p.memMiB, p.cpus)); err != nil {
		missing = append(missing, err.Error())
	} else {
		leaf = l
	}
	if len(missing) > 0 {
		return leaf, &HostNote{What: "vmm not fully confined", Why: strings.Join(missing, "; ")}
	}
	return leaf, nil
}
