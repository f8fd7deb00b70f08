package jail

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/control"
)

// ctlTimeout bounds how long QEMU may take to connect the control port; it does so while
// starting, before the guest runs.
const ctlTimeout = 30 * time.Second

// Run boots a guest, runs s.Argv in it and returns how it ended. The error is nil when the
// command ran (whatever its status) or could not be found or executed (Exit 127/126 with
// ExecError set); otherwise Result.Exit is ExitFailed and the error wraps ErrTimeout,
// ErrGuestCrashed, ErrNoKernel, ErrNoQEMU, ErrBadSpec or the context's error. Timeout
// covers the whole run, boot included.
func Run(ctx context.Context, s Spec) (Result, error) {
	res := Result{Exit: ExitFailed}
	log := s.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	qemu, err := FindQEMU()
	if err != nil {
		return res, err
	}
	want := s.Accel
	if want == "" {
		want = os.Getenv("CRACKBOX_ACCEL")
	}
	accel, why, err := ChooseAccel(want, ProbeHost())
	if err != nil {
		return res, err
	}
	kvmGID := -1
	if accel == AccelKVM {
		kvmGID = kvmDeviceGID()
	}
	snapMode, err := snapshotMode(s.Snapshot)
	if err != nil {
		return res, err
	}
	vmm := pickVMM(os.Geteuid(), InvokingUser(), kvmGID)
	p, err := makePlan(s, vmm.UserFS)
	if err != nil {
		return res, err
	}
	cache := s.CacheDir
	if cache == "" {
		cache = CacheDir()
	}
	kernel, err := FindKernel(s.Kernel, cache)
	if err != nil {
		return res, err
	}
	if err := checkKernelCPUs(kernel, p.cpus); err != nil {
		return res, err
	}
	mk, err := probeKernel(kernel)
	if err == nil {
		err = mk.adapt(p, os.Geteuid())
	}
	if err != nil {
		return res, err
	}
	if ok, why := snapshotCompatible(snapInputOf(p, snapMode)); !ok && snapMode == SnapshotOn {
		return res, fmt.Errorf("%w: snapshot on, but this run cannot be restored from one: %s (use snapshot auto or off)", ErrBadSpec, why)
	}
	gi, err := FindGuestInit(s.GuestInit)
	if err != nil {
		return res, err
	}
	initrd, err := mk.initramfs(gi, cache)
	if err != nil {
		return res, fmt.Errorf("initramfs for %s: %w", gi, err)
	}
	if accel == AccelTCG && (want == "" || want == AccelAuto) {
		log.Warn("no usable kvm, using tcg (slow)", "why", why)
	}
	res.Accel = accel

	if vmm.ID != nil && vmm.ID.PerRun {
		c, err := claimVMMUID(runDirBase(s.RunDirBase))
		if err != nil {
			return res, err
		}
		defer c.release()
		vmm.ID.UID, vmm.ID.GID, vmm.ID.claim = c.UID, c.UID, c
	}
	rd, err := newRunDir(runDirBase(s.RunDirBase), vmm.ID)
	if err != nil {
		return res, err
	}
	res.RunDir = rd.Dir
	keep := false
	defer func() { rd.remove(keep) }()

	runCtx := ctx
	if s.Timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}

	leaf := vmmConfinement(rd.ID, p, os.Geteuid(), log)
	defer leaf.remove()

	var tap *Tap
	if s.Net.Mode == NetTap {
		tap = s.Net.Tap
	}
	start := vmStart{
		qemu: qemu, kernel: kernel, initrd: initrd, accel: accel, vmm: vmm.ID, tap: tap, leaf: leaf,
		append: kernelCmdline(accel, p.machine, tscKHz(), s.Debug),
	}
	rlog := log.With("run", rd.ID)
	v, conn := bootSnapshot(runCtx, p, start, snapMode, cache, runDirBase(s.RunDirBase), rd, rlog)
	res.Restored = v != nil
	if v == nil {
		v, err = startVM(p, start, rd, rlog)
		if err != nil {
			keep = true
			return res, fmt.Errorf("start guest (logs in %s): %w", rd.Dir, err)
		}
		conn, err = v.acceptCtl(ctlTimeout)
		if err != nil {
			v.shutdown(0)
			keep = true
			return res, fmt.Errorf("start guest (logs in %s): %w", rd.Dir, err)
		}
		if m, err := dialQMP(rd.vmPath("qmp.sock"), 5*time.Second, v.exited); err == nil {
			v.qmp = m
			st, err := m.status(2 * time.Second)
			log.Debug("qmp connected", "status", st, "err", err)
		} else {
			log.Warn("qmp unavailable, will kill qemu to stop it", "err", err)
		}
	}
	defer conn.Close()

	// A guest that dies takes QEMU with it; the control socket then reads EOF after the
	// bytes already sent, which ends the session. This is only a backstop.
	go func() {
		<-v.exited
		time.Sleep(5 * time.Second)
		conn.Close()
	}()

	shareLog, err := openRunLog(rd.path("shares.log"))
	if err != nil {
		return res, err
	}
	defer shareLog.Close()
	shares := newStreamShares(p, diskQuota(s.DiskQuota), shareLog, rlog)
	defer shares.wait()

	var startedAt time.Time
	var startedMu sync.Mutex
	hooks := sessionHooks{
		Signals: s.Signals, Resize: s.Resize,
		ProxyConn: s.Net.ProxyConn, MCPConn: s.MCPConn, ShareConn: shares.serve,
		Log: log,
		Started: func(pid int) {
			startedMu.Lock()
			startedAt = time.Now()
			startedMu.Unlock()
			if s.Started != nil {
				s.Started(pid)
			}
		},
	}
	stdin := s.Stdin
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	p.rs.Seed = make([]byte, 32)
	_, _ = rand.Read(p.rs.Seed)
	p.rs.TimeUnixNano = time.Now().UnixNano()
	exit, serr := runSession(runCtx, conn, p.rs, Stdio{Stdin: stdin, Stdout: orDiscard(s.Stdout), Stderr: orDiscard(s.Stderr)}, hooks)
	end := time.Now()
	startedMu.Lock()
	if !startedAt.IsZero() {
		res.Boot, res.Run = startedAt.Sub(v.started), end.Sub(startedAt)
	} else {
		res.Boot = end.Sub(v.started)
	}
	startedMu.Unlock()

	switch {
	case serr == nil:
		// The guest synced and sent its exit frame; do not wait for its reboot.
		v.shutdown(0)
		return exitResult(res, exit), nil
	case runCtx.Err() != nil:
		// runSession asked the guest to power off; give it a moment, then quit.
		v.shutdown(2 * time.Second)
		if ctx.Err() != nil {
			return res, ctx.Err()
		}
		return res, fmt.Errorf("%w: the command did not finish within %s; the guest was stopped", ErrTimeout, s.Timeout)
	default:
		v.shutdown(3 * time.Second)
		keep = true
		res.ConsoleLog = rd.path("console.log")
		return res, fmt.Errorf("%w: %s (console log: %s)", ErrGuestCrashed, crashReason(v, serr), res.ConsoleLog)
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// exitResult maps the guest's exit frame to Docker-like statuses.
func exitResult(res Result, e control.Exit) Result {
	switch {
	case e.Error == control.ExecNotFound:
		res.Exit, res.ExecError = ExitNotFound, "command not found"
	case e.Error == control.ExecNotExecutable:
		res.Exit, res.ExecError = ExitNotExecutable, "command not executable"
	case e.Error != "":
		res.Exit, res.ExecError = ExitFailed, e.Error
	case e.Signal > 0:
		res.Exit, res.Signal = ExitSignalBase+e.Signal, e.Signal
	default:
		res.Exit = e.Code
	}
	return res
}

// crashReason picks the line that explains a crash from the console log.
func crashReason(v *vm, serr error) string {
	con := v.tail("console.log", 64<<10)
	for _, marker := range []string{"Kernel panic", "Out of memory", "Attempted to kill init", "BUG:", "Oops"} {
		if i := strings.Index(con, marker); i >= 0 {
			line := con[i:]
			if j := strings.IndexByte(line, '\n'); j >= 0 {
				line = line[:j]
			}
			return "guest kernel: " + strings.TrimSpace(line)
		}
	}
	select {
	case <-v.exited:
		q := strings.TrimSpace(v.tail("qemu.log", 300))
		switch {
		case v.waitErr != nil && q != "":
			return fmt.Sprintf("qemu exited (%v): %s", v.waitErr, q)
		case v.waitErr != nil:
			return fmt.Sprintf("qemu exited (%v)", v.waitErr)
		}
		return "the guest powered off without reporting an exit status"
	default:
	}
	if errors.Is(serr, ErrSessionLost) {
		return serr.Error()
	}
	return "control session failed: " + serr.Error()
}
