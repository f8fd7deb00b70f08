// Package jail runs one command inside a throwaway QEMU guest and reports how it ended.
//
// Run is the entry point: `crackbox run` calls it once per command and arizuko once
// per agent turn. It boots a minimal kernel with guest-init as PID 1, shares the host's
// /usr, /etc and /opt read-only (plus the work directory and volumes the caller names),
// drives the control session (session.go), and tears everything down again.
// The rest of the API is what a caller of Run needs: Spec and its option types and
// constants, Result, and the sentinel errors to branch on; GC removes what killed runs
// left behind. What Run looks up on the host lives in the packages beneath it, which
// `crackbox doctor` and `crackbox setup` call too: host (kvm, accelerator, cgroup and
// kernel probes), install (kernel, guest-init, QEMU, cache) and rundir (the run dir base).
//
// It reads no CRACKBOX_* environment: the kernel, guest-init, accelerator, cache and
// snapshot mode come in the Spec (crackbox maps them in pkg/config, arizuko in its turns
// config, tests in jailtest).
package jail

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/control"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// Sentinel errors callers branch on.
var (
	// ErrTimeout: Spec.Timeout passed before the command ended; the guest was stopped.
	ErrTimeout = errors.New("jail: timeout")
	// ErrGuestCrashed: the guest kernel panicked, ran out of memory, or QEMU died without
	// an exit frame. The error text names the kept console log.
	ErrGuestCrashed = errors.New("jail: guest crashed")
	// ErrNoKernel: no guest kernel was found.
	ErrNoKernel = install.ErrNoKernel
	// ErrNoQEMU: qemu-system-x86_64 is not installed.
	ErrNoQEMU = install.ErrNoQEMU
	// ErrBadSpec: the Spec is invalid (a bad volume, a refused share, a bad env entry...).
	ErrBadSpec = errors.New("jail: bad spec")
)

// Exit statuses crackbox itself uses, Docker style.
const (
	ExitFailed        = 125 // crackbox failed (boot, crash, timeout, bad input)
	ExitNotExecutable = 126
	ExitNotFound      = 127
	ExitSignalBase    = 128 // + signal number
)

// Network modes: the one spelling of each, shared with the guest (pkg/jail/control).
const (
	NetNone      = control.NetNone      // loopback only
	NetTap       = control.NetTap       // a tap device, see Tap
	NetProxyOnly = control.NetProxyOnly // no NIC; guest connections reach ProxyConn
)

// NetProxyOnlyAlias is the config file's older name for NetProxyOnly, still accepted.
const NetProxyOnlyAlias = "user"

// CanonicalNet returns mode in its one spelling: the older alias becomes NetProxyOnly,
// anything else is returned as it is for the caller to judge.
func CanonicalNet(mode string) string {
	if mode == NetProxyOnlyAlias {
		return NetProxyOnly
	}
	return mode
}

// DefaultProxyListen is where guest-init listens in proxy-only mode unless
// Net.ProxyListen says otherwise. The guest always dials it; the host never does.
const DefaultProxyListen = "127.0.0.1:3128"

// Tap describes a tap device the caller created; the guest gets eth0 on it.
type Tap struct {
	Name      string   // interface name, used when File is nil
	File      *os.File // an open tap fd (preferred: QEMU needs no privilege to open it)
	GuestAddr string   // CIDR, e.g. 10.77.0.2/30
	Gateway   string
	DNS       string
}

// Net configures the guest network.
type Net struct {
	Mode string // NetNone (default), NetTap or NetProxyOnly
	Tap  *Tap   // NetTap only
	// ProxyURL is exported in the guest as HTTP(S)_PROXY and friends.
	ProxyURL string
	// ProxyListen is where guest-init listens in proxy-only mode (default DefaultProxyListen).
	ProxyListen string
	// ProxyConn receives each guest connection to ProxyListen (proxy-only mode).
	ProxyConn func(net.Conn)
	// TrustCA is a PEM CA certificate the command trusts on top of the
	// system bundle (the run's secret-injection CA; never its key).
	TrustCA []byte
}

// Volume is a host directory shared into the guest.
type Volume struct {
	Host     string
	Guest    string
	ReadOnly bool
	// NoSymlinks refuses the volume when any component of Host is a symlink,
	// for callers whose host path lies under directories someone else
	// (another guest) can write.
	NoSymlinks bool
}

// User is the identity the command runs as in the guest.
type User struct {
	UID, GID int
	Groups   []int
	Home     string // HOME in the guest, an empty directory owned by UID
}

// Spec is one command to run in one guest.
type Spec struct {
	Argv []string
	// Env is the complete list of KEY=VALUE the command gets on top of PATH, HOME, TERM
	// and LANG; nothing else from the host environment reaches the guest.
	Env []string
	// Path is the caller's PATH: the command's PATH is those of its entries that exist in
	// the guest's view, in order (a relative one against Dir), else DefaultPath. A PATH
	// in Env wins; "" means DefaultPath.
	Path string
	// Dir is the command's working directory in the guest; default Workdir, else HOME.
	Dir string
	// Workdir is a host directory shared at the same absolute path; "" shares nothing.
	Workdir   string
	WorkdirRO bool
	// WorkdirNoSymlinks refuses Workdir when any component of it is a symlink,
	// like Volume.NoSymlinks.
	WorkdirNoSymlinks bool
	// WorkdirSync is when the workdir's changes reach the host: WorkdirSyncLive (also
	// "") as the command writes them, or WorkdirSyncExit all at once when it ends
	// (workdirsync.go). The crackbox CLI defaults to exit; "" stays live for library
	// callers whose shares other processes use during the run (arizuko homes).
	WorkdirSync string
	Volumes     []Volume
	// Force allows sharing the home directory and credential directories (~/.ssh, ...).
	Force bool
	// SystemShare allows read-write shares (workdir included) of system
	// directories and of crackbox's cache and state (systemshare.go).
	SystemShare bool
	// StateDirs are more directories no read-write share may be, hold or lie
	// in unless SystemShare: the caller's own state, such as run records.
	StateDirs []string

	// RootFS is a directory tree used as the guest root; "" = the host view.
	RootFS string
	// User defaults to the invoking user (SUDO_UID/SUDO_GID when run through sudo).
	User *User
	// Root runs the command as uid 0 in the guest.
	Root     bool
	Hostname string

	TTY        bool
	Rows, Cols uint16

	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Signals        <-chan int       // signal numbers forwarded to the command
	Resize         <-chan [2]uint16 // rows, cols

	Kernel    string // default: see install.FindKernel
	GuestInit string // default: see install.FindGuestInit
	CacheDir  string // kernels, initramfs images and snapshots; default: install.CacheDir()
	Accel     string // "auto" (default), "kvm" or "tcg"
	Machine   string // "microvm" (default) or "q35"
	CPUs      int    // default 1
	MemoryMiB int    // default 512
	// Timeout bounds the whole run, boot included; 0 = none.
	Timeout    time.Duration
	RunDirBase string // default: rundir.DefaultBase(); created or repaired by rundir.EnsureBase
	Debug      bool
	Log        *slog.Logger
	// HostNotes, when set, gets in one call before the guest starts what this host
	// lacks for a fast, fully confined run (HostNote); unset, each is a warning in Log.
	HostNotes func([]HostNote)

	Net Net

	// MCPSocket is a guest path where guest-init serves a unix socket whose connections
	// reach MCPConn.
	MCPSocket string
	MCPConn   func(net.Conn)

	// Snapshot is SnapshotAuto (default, also ""), SnapshotOn or SnapshotOff: whether
	// the guest is restored from a snapshot of a booted idle guest instead of booting
	// (snapshot.go).
	Snapshot string

	// DiskQuota is how many bytes each read-write share (workdir, volumes) may grow by
	// during the run; 0 = DefaultDiskQuota, negative = unbounded. A guest that writes
	// past it gets ENOSPC.
	DiskQuota int64

	// Started, when set, is called once the command runs in the guest.
	Started func(pid int)

	// Live, when set, is handed the running guest before its command starts. Only
	// tests set it, to inspect a guest from the host (live.go).
	Live func(*Live)
}

// Result is how a run ended.
type Result struct {
	// Exit is the command's status, or ExitFailed, ExitNotExecutable, ExitNotFound,
	// or ExitSignalBase+Signal.
	Exit   int
	Signal int
	// ExecError is set when the command could not be started (not found, not executable,
	// a setup failure in the guest).
	ExecError  string
	RunDir     string
	ConsoleLog string // path of the kept console log after a crash; "" otherwise
	Boot       time.Duration
	Run        time.Duration
	Accel      string
	// Restored: the guest was restored from a snapshot rather than booted.
	Restored bool
}

// Defaults.
const (
	DefaultMemoryMiB = 512
	DefaultDiskQuota = 10 << 30
	DefaultPath      = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)
