package jail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// A run whose configuration fits a fixed device layout is restored from a snapshot of a
// guest booted once to guest-init's wait for the RunSpec, instead of booting: the boot
// (about 1 s under TCG) becomes a 0.1-0.2 s restore. Everything that can vary per run
// stays out of the guest until the RunSpec arrives: shares are fixed 9p slots whose host
// paths are bound per run (fsdev paths are not migrated state) and mounted only after
// the restore. Any failure falls back to a cold boot.

// Snapshot modes (Spec.Snapshot).
const (
	SnapshotAuto = "auto" // restore when the run fits the snapshot layout
	SnapshotOn   = "on"   // as auto, but a run that cannot fit is refused (ErrBadSpec)
	SnapshotOff  = "off"  // always boot cold
)

// snapSlots is how many workdir/volume 9p slots the snapshot layout has; unused slots
// serve an empty read-only directory. microvm has 8 virtio-mmio transports: rng, serial,
// the two 9p lowers, the swap disk and the NIC leave two.
const snapSlots = 2

// snapMAC is the snapshot guest's MAC, the one QEMU gives a first NIC by default.
const snapMAC = "52:54:00:12:34:56"

// snapFormat versions the layout and the guest protocol the snapshot was made for.
const snapFormat = "crackbox-snapshot-1"

// snapReadyMarker is what guest-init prints on the console once it only waits for the
// RunSpec (guestfs/init/hoststate.go).
const snapReadyMarker = "waiting for run spec"

// Bounds for making and restoring a snapshot.
const (
	snapBootTimeout    = 90 * time.Second
	snapIdleTimeout    = 5 * time.Second        // from the marker to every vCPU halted (vcpuidle.go)
	snapSettle         = 300 * time.Millisecond // instead, where the vCPU threads cannot be watched
	snapMigrateTimeout = 60 * time.Second
	snapLockTimeout    = 3 * time.Minute
	snapRestoreTimeout = 30 * time.Second
)

// snapRun is one run's view of the snapshot store.
type snapRun struct {
	dir     string // <cache>/snapshots
	key     string
	p       *plan
	st      vmStart // kernel, initrd, accel, append, vmm of the run
	runBase string
	log     *slog.Logger
}

func (sr *snapRun) path() string { return filepath.Join(sr.dir, sr.key+".snap") }

// failedPath is the marker of a snapshot that could not be made or restored on this key;
// it holds the reason.
func (sr *snapRun) failedPath() string { return filepath.Join(sr.dir, sr.key+".failed") }

// newSnapRun computes the run's snapshot key.
func newSnapRun(p *plan, st vmStart, cache, runBase string, log *slog.Logger) (*snapRun, error) {
	keyed := st
	keyed.layout = snapLayout(nil, "-")
	cfg := newVMConfig(p, keyed)
	host, err := snapHost(st.accel)
	if err != nil {
		return nil, err
	}
	key, err := snapKey(st.qemu, st.kernel, st.initrd, host, cfg)
	if err != nil {
		return nil, err
	}
	return &snapRun{dir: filepath.Join(cache, "snapshots"), key: key, p: p, st: st, runBase: runBase, log: log}, nil
}

// make boots a guest with the snapshot layout and empty shares, waits until guest-init
// only waits for the RunSpec (the host has accepted the control connection and sends
// nothing), and migrates it into path.
func (sr *snapRun) make(ctx context.Context, path string) (err error) {
	rd, err := newRunDir(sr.runBase, sr.st.vmm)
	if err != nil {
		return err
	}
	defer func() { rd.remove(false) }()
	empty, err := emptyDir(rd, sr.st.vmm)
	if err != nil {
		return err
	}
	st := sr.st
	st.tap, st.incoming = nil, nil
	st.layout = snapLayout(nil, empty)
	// The guest learns the disk's size at boot; a restored run's swap fits in the largest.
	st.swapSize = swapMax
	v, err := startVM(sr.p, st, rd, sr.log.With("snapshot", rd.ID))
	if err != nil {
		return err
	}
	defer v.shutdown(0)
	fail := func(err error) error {
		return fmt.Errorf("%w (console: %q)", err, strings.TrimSpace(v.tail("console.log", 300)))
	}
	conn, err := v.acceptCtl(ctlTimeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := v.waitConsole(ctx, snapReadyMarker, snapBootTimeout); err != nil {
		return fail(err)
	}
	q, err := dialQMP(rd.vmPath("qmp.sock"), 5*time.Second, v.exited)
	if err != nil {
		return err
	}
	defer q.close()
	if err := sr.settle(ctx, q, v.cmd.Process.Pid); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(sr.dir, sr.key+".snap.tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		tmp.Close()
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if err := migrateInto(ctx, q, tmp); err != nil {
		return fail(err)
	}
	_ = q.quit(qmpTimeout)
	if err := tmp.Sync(); err != nil {
		return err
	}
	if st, err := tmp.Stat(); err != nil || st.Size() == 0 {
		return errors.New("snapshot: migration wrote nothing")
	}
	return os.Rename(tmp.Name(), path)
}

// settle waits until every vCPU of the guest is halted, so the snapshot holds a guest
// that only waits for its RunSpec.
func (sr *snapRun) settle(ctx context.Context, q *monitor, pid int) error {
	start := time.Now()
	tids, err := q.vcpuThreadIDs()
	if err != nil {
		return err
	}
	idle, err := waitVCPUsIdle(ctx, pid, tids, snapIdleTimeout)
	switch {
	case errors.Is(err, errNoVCPUThreads):
		time.Sleep(snapSettle)
	case err != nil:
		return err
	}
	sr.log.Debug("snapshot guest settled", "idle", idle, "vcpus", len(tids), "waited", time.Since(start).Round(time.Millisecond))
	return nil
}

// migrateInto migrates the guest into f. The file descriptor reaches QEMU over QMP
// (getfd), so QEMU keeps spawn=deny: an exec: migration would need it relaxed.
func migrateInto(ctx context.Context, q *monitor, f *os.File) error {
	// The default bandwidth cap (32 MiB/s) would make this take seconds.
	if _, err := q.do("migrate-set-parameters", map[string]any{"max-bandwidth": int64(1) << 40}, nil, qmpTimeout); err != nil {
		return err
	}
	if _, err := q.do("getfd", map[string]any{"fdname": "snap"}, f, qmpTimeout); err != nil {
		return err
	}
	if _, err := q.do("migrate", map[string]any{"uri": "fd:snap"}, nil, qmpTimeout); err != nil {
		return err
	}
	return q.waitMigrated(ctx, snapMigrateTimeout)
}

// restore starts QEMU from the snapshot at path with the run's shares in the slots and
// waits until the guest runs. On error nothing is left running.
func (sr *snapRun) restore(ctx context.Context, path string, rd *runDir) (_ *vm, _ *net.UnixConn, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	empty, err := emptyDir(rd, sr.st.vmm)
	if err != nil {
		return nil, nil, err
	}
	st := sr.st
	st.layout = snapLayout(sr.p.userShare, empty)
	st.incoming = f
	v, err := startVM(sr.p, st, rd, sr.log)
	if err != nil {
		return nil, nil, err
	}
	var conn *net.UnixConn
	defer func() {
		if err != nil {
			if conn != nil {
				conn.Close()
			}
			v.shutdown(0)
		}
	}()
	if conn, err = v.acceptCtl(ctlTimeout); err != nil {
		return nil, nil, err
	}
	m, err := dialQMP(rd.vmPath("qmp.sock"), 5*time.Second, v.exited)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %s", err, strings.TrimSpace(v.tail("qemu.log", 300)))
	}
	v.qmp = m
	deadline := time.Now().Add(snapRestoreTimeout)
	for {
		s, err := m.status(2 * time.Second)
		if err != nil {
			return nil, nil, fmt.Errorf("restore: %w: %s", err, strings.TrimSpace(v.tail("qemu.log", 300)))
		}
		switch s {
		case "running":
			return v, conn, nil
		case "paused":
			// Migration finishes into the source's run state; a paused one needs cont.
			if _, err := m.run("cont", 2*time.Second); err != nil {
				return nil, nil, fmt.Errorf("restore: cont: %w", err)
			}
		case "inmigrate":
		default:
			return nil, nil, fmt.Errorf("restore: vm %s: %s", s, strings.TrimSpace(v.tail("qemu.log", 300)))
		}
		if time.Now().After(deadline) {
			return nil, nil, fmt.Errorf("restore: still %s after %s", s, snapRestoreTimeout)
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-v.exited:
			return nil, nil, fmt.Errorf("restore: qemu exited: %s", strings.TrimSpace(v.tail("qemu.log", 300)))
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// boot makes (if needed) and restores the run's snapshot. A snapshot that fails to
// restore is removed so the next run makes a fresh one; one that fails right after it
// was made marks the key failed, since making it again would fail the same way.
func (sr *snapRun) boot(ctx context.Context, rd *runDir) (*vm, *net.UnixConn, error) {
	path, made, err := sr.ensure(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("make snapshot: %w", err)
	}
	v, conn, err := sr.restore(ctx, path, rd)
	if err != nil {
		err = fmt.Errorf("restore snapshot %s (made now: %v): %w", path, made, err)
		if ctx.Err() == nil {
			os.Remove(path)
			if made {
				sr.markFailed(ctx, err)
			}
		}
		return nil, nil, err
	}
	// The mtime says when it was last used, for pruneSnapshots.
	now := time.Now()
	_ = os.Chtimes(path, now, now)
	return v, conn, nil
}

// emptyDir makes the run's empty directory that unused share slots serve.
func emptyDir(rd *runDir, vmm *vmmIdentity) (string, error) {
	d := rd.vmPath("empty")
	if err := os.Mkdir(d, 0o555); err != nil && !errors.Is(err, os.ErrExist) {
		return "", err
	}
	if vmm != nil {
		if err := os.Chown(d, int(vmm.UID), int(vmm.GID)); err != nil {
			return "", err
		}
	}
	return d, nil
}

// waitConsole waits for a line containing marker in the console log.
func (v *vm) waitConsole(ctx context.Context, marker string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if strings.Contains(v.tail("console.log", 1<<20), marker) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("guest did not print %q within %s", marker, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-v.exited:
			return fmt.Errorf("qemu exited before the guest was ready: %s", strings.TrimSpace(v.tail("qemu.log", 300)))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// dupFile duplicates f, close-on-exec.
func dupFile(f *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(f.Fd()))
	if err != nil {
		return nil, err
	}
	syscall.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), f.Name()), nil
}

// bootSnapshot restores the run's guest from a snapshot when the run fits the layout,
// making the snapshot first if needed. It returns nil when the run must boot cold: not
// compatible, or anything about the snapshot failed (logged at debug level; the run
// never fails for it).
func bootSnapshot(ctx context.Context, p *plan, st vmStart, mode, cache, runBase string, rd *runDir, log *slog.Logger) (*vm, *net.UnixConn) {
	if ok, why := snapshotCompatible(snapInputOf(p, mode)); !ok {
		log.Debug("cold boot", "why", why)
		return nil, nil
	}
	sr, err := newSnapRun(p, st, cache, runBase, log)
	if err != nil {
		log.Debug("cold boot", "why", "snapshot key", "err", err)
		return nil, nil
	}
	start := time.Now()
	v, conn, err := sr.boot(ctx, rd)
	if err != nil {
		lvl := slog.LevelDebug
		if mode == SnapshotOn {
			lvl = slog.LevelWarn
		}
		log.Log(ctx, lvl, "snapshot failed, cold boot", "err", err)
		return nil, nil
	}
	log.Debug("restored from snapshot", "key", sr.key, "took", time.Since(start).Round(time.Millisecond))
	return v, conn
}
