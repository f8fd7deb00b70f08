package turn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// ErrTerminal marks a failure a retry cannot fix: the VMM does not start,
// the agent command is missing, the folder has no agent.
var ErrTerminal = errors.New("terminal turn failure")

// Job is one attempt of a turn, everything the runner needs.
type Job struct {
	Turn store.Turn
	Argv []string
	Env  []string // KEY=VALUE, already filtered by grants
	// Secrets are injected by the run's proxy into requests to their hosts;
	// the guest gets only their placeholders.
	Secrets   []inject.Secret
	Prompt    string   // the agent's stdin
	HostHome  string   // the folder's home on the host, folder.EnsureHome
	GuestHome string   // where the guest sees it, and HOME
	Allow     []string // effective allowlist
	// Socket is the folder's bound MCP socket on the host; MCPConn bridges a
	// guest connection to it and to nothing else.
	Socket    string
	MCPConn   func(net.Conn)
	MemoryMiB int
	CPUs      int
	Stdout    io.Writer // agent output, stdout and stderr, kept for the turn log
	// Answer, when set, gets the agent's stdout alone as well: a folder may
	// deliver it as the reply of a turn that called no reply tool.
	Answer io.Writer
	// MCP is what the host fixed for the turn's socket, for a runner that
	// serves the folder's tools somewhere else than Socket (pkg/arizuko/dispatch).
	MCP gated.Turn
}

// Result is how an attempt ended.
type Result struct {
	Exit      int
	ExecError string
	Egress    string // the egress summary line, "" when nothing was blocked
	// Guarded are the destinations (host:port) the proxy refused as private
	// or the host's own, at most maxGuarded.
	Guarded []string

	ran bool // the runner was called: Exit is the agent's, not a default
}

// Runner runs one attempt. The daemon uses JailRunner; tests may use a host
// process behind the same interface.
type Runner interface {
	Run(ctx context.Context, j Job) (Result, error)
}

// JailRunner runs each attempt in its own guest through jail.Run, with the
// per-run network from netjail.
type JailRunner struct {
	Kernel    string // "" = install.FindKernel's default
	GuestInit string
	Accel     string
	CacheDir  string // kernels, initramfs images, snapshots; "" = install.CacheDir()
	NetMode   string // netjail mode: "" (auto), tap, proxy-only or none
	RunsDir   string // the run dir base of guests and their network claims; "" = rundir.DefaultBase()
	Proxy     proxy.Options
	Timeout   time.Duration // whole attempt, boot included; 0 = 30 min
	Snapshot  string        // jail.Spec.Snapshot: "" (auto), on or off
	// UID and GID run the agent in the guest; -1 = the owner of the folder
	// directory, so files it writes land owned like the folder.
	UID, GID int
	Log      *slog.Logger       // nil discards
	Started  func(turnID int64) // called once the agent process runs
}

// Run boots the guest for j.
func (r *JailRunner) Run(ctx context.Context, j Job) (Result, error) {
	log := r.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	list, err := allow.Parse(j.Allow)
	if err != nil {
		return Result{Exit: jail.ExitFailed}, fmt.Errorf("allowlist: %w: %w", err, ErrTerminal)
	}
	var set *inject.Set
	if len(j.Secrets) > 0 {
		if set, err = inject.New(j.Secrets); err != nil {
			return Result{Exit: jail.ExitFailed}, fmt.Errorf("inject grants: %w: %w", err, ErrTerminal)
		}
	}
	spec, err := r.spec(j, log)
	if err != nil {
		return Result{Exit: jail.ExitFailed}, err
	}
	var g guarded
	popts := r.ProxyOptions()
	hook := popts.OnDecision
	popts.OnDecision = func(d proxy.Decision) {
		g.decision(d)
		if hook != nil {
			hook(d)
		}
	}
	net := netjail.Options{Mode: r.NetMode, RunsDir: r.RunsDir, UID: -1, GID: -1, Allow: list, Proxy: popts, Secrets: set, Log: log}
	res, err := netjail.Jail(ctx, netjail.Job{Net: net, Spec: spec})
	out := Result{Exit: res.Exit, ExecError: res.ExecError, Egress: res.Net.Blocked(), Guarded: g.list()}
	switch {
	case errors.Is(err, jail.ErrNoKernel), errors.Is(err, jail.ErrNoQEMU), errors.Is(err, jail.ErrBadSpec),
		errors.Is(err, netjail.ErrSecretEnv), errors.Is(err, netjail.ErrSecretNoNet):
		return out, fmt.Errorf("%w: %w", err, ErrTerminal)
	case err != nil:
		return out, err
	case res.ExecError != "" && (res.Exit == jail.ExitNotFound || res.Exit == jail.ExitNotExecutable):
		return out, fmt.Errorf("agent command %q: %s: %w", j.Argv[0], res.ExecError, ErrTerminal)
	}
	return out, nil
}

// ProxyOptions are the options of each turn's proxy: the operator's, with
// the allowlist marked as the tenants': its address entries never widen the
// destination guard, only the operator's allow_cidrs do.
func (r *JailRunner) ProxyOptions() proxy.Options {
	o := r.Proxy
	o.TenantLists = true
	return o
}

// spec is the guest of one attempt: the folder's home as the agent's home and
// working directory, owned like the folder, and the MCP bridge.
func (r *JailRunner) spec(j Job, log *slog.Logger) (jail.Spec, error) {
	uid, gid := r.UID, r.GID
	if uid < 0 || gid < 0 {
		fi, err := os.Stat(j.HostHome)
		if err != nil {
			return jail.Spec{}, err
		}
		st := fi.Sys().(*syscall.Stat_t)
		uid, gid = int(st.Uid), int(st.Gid)
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = 30 * time.Minute
	}
	stderr := j.Stdout
	if stderr == nil {
		stderr = io.Discard
	}
	stdout := stderr
	if j.Answer != nil {
		stdout = io.MultiWriter(stderr, j.Answer)
	}
	s := jail.Spec{
		Argv: j.Argv,
		Env:  j.Env,
		// The home must be the real directory: a symlink on its path would
		// share whatever it points at, read-write.
		Volumes:    []jail.Volume{{Host: j.HostHome, Guest: j.GuestHome, NoSymlinks: true}},
		User:       &jail.User{UID: uid, GID: gid, Home: j.GuestHome},
		Dir:        j.GuestHome,
		Hostname:   "arizuko",
		Stdin:      strings.NewReader(j.Prompt),
		Stdout:     stdout,
		Stderr:     stderr,
		Kernel:     r.Kernel,
		GuestInit:  r.GuestInit,
		Accel:      r.Accel,
		CacheDir:   r.CacheDir,
		CPUs:       j.CPUs,
		MemoryMiB:  j.MemoryMiB,
		Timeout:    timeout,
		Log:        log,
		RunDirBase: r.RunsDir,
		MCPSocket:  gated.GuestSocket,
		MCPConn:    j.MCPConn,
		Snapshot:   r.Snapshot,
	}
	if r.Started != nil {
		id := j.Turn.ID
		s.Started = func(int) { r.Started(id) }
	}
	return s, nil
}
