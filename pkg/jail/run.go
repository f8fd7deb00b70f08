package jail

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/control"
	"github.com/crackbox/crackbox/pkg/jail/host"
	"github.com/crackbox/crackbox/pkg/jail/install"
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
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	log := s.Log
	b, err := prepare(s, log)
	if err != nil {
		return res, err
	}
	res.Accel = b.start.accel

	if b.vmm.ID != nil && b.vmm.ID.PerRun {
		c, err := claimVMMUID(runDirBase(s.RunDirBase))
		if err != nil {
			return res, err
		}
		defer c.release()
		b.vmm.ID.UID, b.vmm.ID.GID, b.vmm.ID.claim = c.UID, c.UID, c
	}
	rd, err := newRunDir(runDirBase(s.RunDirBase), b.vmm.ID)
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
	leaf, note := vmmConfinement(rd.ID, b.p, os.Geteuid())
	b.start.leaf = leaf
	defer b.start.leaf.remove()
	if note != nil {
		b.notes = append(b.notes, *note)
	}
	reportHostNotes(s, log, b.notes)
	if s.Net.Mode == NetTap {
		b.start.tap = s.Net.Tap
	}

	rlog := log.With("run", rd.ID)
	shareLog, err := openRunLog(rd.path("shares.log"))
	if err != nil {
		return res, err
	}
	defer shareLog.Close()
	shares := newStreamShares(b.p, diskQuota(s.DiskQuota), shareLog, rlog)
	shares.runAs(b.vmm.ID)
	v, conn, err := b.boot(runCtx, s, rd, rlog)
	res.Restored = b.restored
	if err != nil {
		keep = true
		return res, fmt.Errorf("start guest (logs in %s): %w", rd.Dir, err)
	}
	// The share servers start up while the RunSpec travels and the guest builds its
	// root, so they are ready when it mounts them. Started during the restore instead,
	// they only compete with QEMU for the CPU.
	go shares.start()
	defer shares.close()
	defer conn.Close()
	if err := connectSharePorts(b.p, rd, shares, v.exited); err != nil {
		v.shutdown(0)
		keep = true
		return res, fmt.Errorf("start guest (logs in %s): %w", rd.Dir, err)
	}
	if s.Live != nil {
		s.Live(&Live{v: v, rd: rd})
	}

	// A guest that dies takes QEMU with it; the control socket then reads EOF after the
	// bytes already sent, which ends the session. This is only a backstop.
	go func() {
		<-v.exited
		time.Sleep(5 * time.Second)
		conn.Close()
	}()

	exit, serr, err := runCommand(runCtx, s, b.p, v, conn, shares, &res)
	if err != nil {
		v.shutdown(0)
		return res, err
	}
	res, keep, err = finish(ctx, runCtx, s, v, rd, res, exit, serr)
	return res, err
}

// prepared is a run decided before anything is claimed or started: the plan, the QEMU,
// kernel, initramfs and accelerator, and how QEMU is confined.
type prepared struct {
	p        *plan
	start    vmStart // the run's cgroup leaf and tap are added once claimed
	vmm      vmmPlan
	snapMode string
	cache    string
	restored bool // boot restored the guest from a snapshot
	notes    []HostNote
}

// prepare validates s and finds everything the guest boots from.
func prepare(s Spec, log *slog.Logger) (*prepared, error) {
	qemu, err := install.FindQEMU()
	if err != nil {
		return nil, err
	}
	accel, why, err := host.ChooseAccel(s.Accel, host.Probe())
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	kvmGID := -1
	if accel == AccelKVM {
		kvmGID = host.KVMGroup()
	}
	b := &prepared{cache: s.CacheDir}
	if b.snapMode, err = snapshotMode(s.Snapshot); err != nil {
		return nil, err
	}
	b.vmm = pickVMM(os.Geteuid(), invokingUser(), kvmGID)
	if b.p, err = makePlan(s, b.vmm.UserFS); err != nil {
		return nil, err
	}
	if b.cache == "" {
		b.cache = install.CacheDir()
	}
	kernel, err := install.FindKernel(s.Kernel, b.cache)
	if err != nil {
		return nil, err
	}
	if err := checkKernelCPUs(kernel, b.p.cpus); err != nil {
		return nil, err
	}
	mk, err := probeKernel(kernel)
	if err == nil {
		err = mk.adapt(b.p, os.Geteuid())
	}
	if err != nil {
		return nil, err
	}
	assignSharePorts(b.p)
	if ok, why := snapshotCompatible(snapInputOf(b.p, b.snapMode)); !ok && b.snapMode == SnapshotOn {
		return nil, fmt.Errorf("%w: snapshot on, but this run cannot be restored from one: %s (use snapshot auto or off)", ErrBadSpec, why)
	}
	gi, err := install.FindGuestInit(s.GuestInit)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadSpec, err)
	}
	initrd, err := mk.initramfs(gi, b.cache)
	if err != nil {
		return nil, fmt.Errorf("initramfs for %s: %w", gi, err)
	}
	if accel == AccelTCG && (s.Accel == "" || s.Accel == AccelAuto) {
		b.notes = append(b.notes, HostNote{What: "no usable kvm, using tcg (slow)", Why: why})
	}
	b.start = vmStart{
		qemu: qemu, kernel: kernel, initrd: initrd, accel: accel, vmm: b.vmm.ID,
		append:  kernelCmdline(accel, b.p.machine, tscKHz(), s.Debug),
		swapDir: b.cache, swapSize: b.p.rs.Swap,
	}
	return b, nil
}

// boot restores the guest from a snapshot when the run fits one, else boots it cold,
// and returns it with its control connection accepted. On error the run dir holds the
// logs and nothing is left running.
func (b *prepared) boot(ctx context.Context, s Spec, rd *runDir, log *slog.Logger) (*vm, *net.UnixConn, error) {
	v, conn := bootSnapshot(ctx, b.p, b.start, b.snapMode, b.cache, runDirBase(s.RunDirBase), rd, log)
	if v != nil {
		b.restored = true
		return v, conn, nil
	}
	v, err := startVM(b.p, b.start, rd, log)
	if err != nil {
		return nil, nil, err
	}
	conn, err = v.acceptCtl(ctlTimeout)
	if err != nil {
		v.shutdown(0)
		return nil, nil, err
	}
	if m, err := dialQMP(rd.vmPath("qmp.sock"), 5*time.Second, v.exited); err == nil {
		v.qmp = m
		st, err := m.status(2 * time.Second)
		log.Debug("qmp connected", "status", st, "err", err)
	} else {
		log.Warn("qmp unavailable, will kill qemu to stop it", "err", err)
	}
	return v, conn, nil
}

// runCommand sends the RunSpec over conn and drives the session until the command ends,
// handing the guest's share streams to shares, and records the boot and run times in
// res. serr is how the session ended; err a failure to set it up.
func runCommand(ctx context.Context, s Spec, p *plan, v *vm, conn net.Conn, shares *streamShares, res *Result) (exit control.Exit, serr, err error) {

	var startedAt time.Time
	var startedMu sync.Mutex
	hooks := sessionHooks{
		Signals: s.Signals, Resize: s.Resize,
		ProxyConn: s.Net.ProxyConn, MCPConn: s.MCPConn, ShareConn: shares.serve, SyncConn: shares.sync, Drain: syncDrain(p),
		Log: s.Log,
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
	exit, serr = runSession(ctx, conn, p.rs, Stdio{Stdin: stdin, Stdout: orDiscard(s.Stdout), Stderr: orDiscard(s.Stderr)}, hooks)
	end := time.Now()
	startedMu.Lock()
	if !startedAt.IsZero() {
		res.Boot, res.Run = startedAt.Sub(v.started), end.Sub(startedAt)
	} else {
		res.Boot = end.Sub(v.started)
	}
	startedMu.Unlock()
	return exit, serr, nil
}

// finish stops the guest and turns how the session ended into the result; keep says
// whether the run dir holds logs worth keeping (a crash).
func finish(ctx, runCtx context.Context, s Spec, v *vm, rd *runDir, res Result, exit control.Exit, serr error) (_ Result, keep bool, _ error) {
	switch {
	case serr == nil:
		// The guest synced and sent its exit frame; do not wait for its reboot.
		v.shutdown(0)
		return exitResult(res, exit), false, nil
	case runCtx.Err() != nil:
		// runSession asked the guest to power off; give it a moment, then quit.
		v.shutdown(2 * time.Second)
		if ctx.Err() != nil {
			return res, false, ctx.Err()
		}
		return res, false, fmt.Errorf("%w: the command did not finish within %s; the guest was stopped", ErrTimeout, s.Timeout)
	default:
		// Whether QEMU quit by itself decides what the crash was, so ask before stopping it.
		alone := v.waitExit(3 * time.Second)
		v.shutdown(0)
		res.ConsoleLog = rd.path("console.log")
		return res, true, fmt.Errorf("%w: %s (console log: %s)", ErrGuestCrashed, crashReason(v, serr, alone), res.ConsoleLog)
	}
}

func orDiscard(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// crashReason picks the line that explains a crash from the console log; alone says
// whether QEMU had quit before the host stopped it.
func crashReason(v *vm, serr error, alone bool) string {
	if line := consoleReason(v.tail("console.log", 64<<10)); line != "" {
		return line
	}
	if alone {
		q := strings.TrimSpace(v.tail("qemu.log", 300))
		switch {
		case v.waitErr != nil && q != "":
			return fmt.Sprintf("qemu exited (%v): %s", v.waitErr, q)
		case v.waitErr != nil:
			return fmt.Sprintf("qemu exited (%v)", v.waitErr)
		}
		return "the guest powered off without reporting an exit status"
	}
	if errors.Is(serr, ErrSessionLost) {
		return serr.Error()
	}
	return "control session failed: " + serr.Error()
}
