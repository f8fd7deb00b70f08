package jail

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/crackbox/crackbox/internal/logfile"
	"github.com/crackbox/crackbox/internal/proc"
)

// vm is one running QEMU with its helpers.
type vm struct {
	rd      *runDir
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
	fsd     []*exec.Cmd
	console *consoleLog
	ctl     *net.UnixListener
	qmp     *monitor
	started time.Time
	log     *slog.Logger
}

// vmStart is what startVM needs beyond the plan.
type vmStart struct {
	qemu, kernel, initrd string
	accel                string
	append               string
	vmm                  *vmmIdentity
	leaf                 *cgroupLeaf // the run's cgroup; nil: none
	tap                  *Tap
	// layout, when set, is the snapshot device layout (snapshot.go): these shares replace
	// the plan's lowers and user shares, and no helper daemons start.
	layout []vmShare
	// incoming is a snapshot file QEMU restores from instead of booting.
	incoming *os.File
	// swapDir holds the swap disk (swapdisk.go); swapSize is its size.
	swapDir  string
	swapSize int64
}

// startVM starts QEMU for the plan: it opens what QEMU inherits, starts the share
// daemons, listens on the control socket, then launches QEMU. On error nothing is left
// running.
func startVM(p *plan, st vmStart, rd *runDir, log *slog.Logger) (_ *vm, err error) {
	v := &vm{rd: rd, exited: make(chan struct{}), log: log}
	defer func() {
		if err != nil {
			v.shutdown(0)
		}
	}()
	cfg := newVMConfig(p, st)
	cfg.CtlSock, cfg.QMPSock = rd.vmPath("ctl.sock"), rd.vmPath("qmp.sock")
	cfg.SharePorts = sharePortSocks(rd)
	files, err := inheritedFiles(st, &cfg)
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	if err != nil {
		return nil, err
	}
	// A snapshot layout has its shares fixed and needs no daemons.
	if st.layout == nil {
		if err := v.addShares(&cfg, p.lowers, "lower", "virtiofsd-lower.log", lowerFsdCmd, st); err != nil {
			return nil, err
		}
		if err := v.addShares(&cfg, p.userShare, "fs", "virtiofsd.log", shareFsdCmd, st); err != nil {
			return nil, err
		}
	}
	if err := v.listenCtl(cfg.CtlSock, st.vmm); err != nil {
		return nil, err
	}
	if err := v.launch(p, st, cfg, files); err != nil {
		return nil, err
	}
	return v, nil
}

// inheritedFiles opens what QEMU inherits as fd 3 on: the kernel and initramfs (QEMU runs
// as a uid that cannot reach a kernel under /root), the swap disk, the snapshot to
// restore and the tap.
// The caller closes the files, also on error, once QEMU has started.
func inheritedFiles(st vmStart, cfg *vmConfig) ([]*os.File, error) {
	var files []*os.File
	for _, path := range []string{st.kernel, st.initrd} {
		f, err := os.Open(path)
		if err != nil {
			return files, fmt.Errorf("open %s: %w", path, err)
		}
		files = append(files, f)
	}
	swap, err := openSwapDisk(st.swapDir, st.swapSize, st.vmm)
	if err != nil {
		return files, err
	}
	files = append(files, swap) // swapFD
	if st.incoming != nil {
		// Dup it: files is closed once QEMU has started, the caller keeps its own.
		f, err := dupFile(st.incoming)
		if err != nil {
			return files, err
		}
		files = append(files, f)
		cfg.Incoming = "fd:" + strconv.Itoa(2+len(files))
	}
	if st.tap != nil {
		if st.tap.File != nil {
			// Not the caller's to lose: the tap is closed by its owner, so dup it too.
			f, err := dupFile(st.tap.File)
			if err != nil {
				return files, err
			}
			files = append(files, f)
			cfg.TapFD = 2 + len(files)
		} else {
			cfg.TapName = st.tap.Name
		}
	}
	return files, nil
}

// addShares attaches shares as devices: 9p ones QEMU serves itself, virtio-fs ones through
// a virtiofsd each (sockets <prefix><i>.sock, logging to logName). Stream shares are
// served over the control session, not as devices.
func (v *vm) addShares(cfg *vmConfig, shares []share, prefix, logName string, build fsdCmd, st vmStart) error {
	var logf *os.File
	defer func() {
		if logf != nil {
			logf.Close()
		}
	}()
	for i, s := range shares {
		if s.FS == FSStream {
			continue
		}
		vs := vmShare{share: s}
		if s.FS == FSVirtiofs {
			if logf == nil {
				var err error
				if logf, err = os.OpenFile(v.rd.path(logName), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
					return err
				}
			}
			vs.Sock = v.rd.vmPath(prefix + strconv.Itoa(i) + ".sock")
			c, err := startVirtiofsd(s, vs.Sock, st.vmm, logf, build)
			if err != nil {
				return err
			}
			v.fsd = append(v.fsd, c)
			st.leaf.add(c.Process.Pid)
		}
		cfg.Shares = append(cfg.Shares, vs)
	}
	return nil
}

// listenCtl listens on the control socket QEMU connects to, owned by QEMU's uid.
func (v *vm) listenCtl(path string, vmm *vmmIdentity) error {
	var err error
	v.ctl, err = net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return fmt.Errorf("control socket: %w", err)
	}
	if vmm != nil {
		if err := os.Chown(path, int(vmm.UID), int(vmm.GID)); err != nil {
			return fmt.Errorf("control socket: %w", err)
		}
	}
	return nil
}

// launch starts QEMU with its console and log files and watches for its exit.
func (v *vm) launch(p *plan, st vmStart, cfg vmConfig, files []*os.File) error {
	var conW *os.File
	var err error
	v.console, conW, err = startConsoleLog(v.rd.path("console.log"), consoleMax)
	if err != nil {
		return err
	}
	defer conW.Close() // QEMU holds its own copy once started
	qlog, err := openRunLog(v.rd.path("qemu.log"))
	if err != nil {
		return err
	}
	defer qlog.Close()

	args := modularArgs(p, cfg.args())
	v.log.Debug("qemu start", "args", args)
	// Own process group (a terminal's Ctrl-C reaches crackbox, which forwards it to the
	// command, never QEMU) and a parent-death signal (QEMU dies with crackbox).
	var j *vmmJail
	if v.cmd, j, err = qemuCommand(st, cfg, v.rd, args); err != nil {
		return err
	}
	v.cmd.Stdout = conW
	v.cmd.Stderr = qlog
	v.cmd.ExtraFiles = files
	v.started = time.Now()
	release, err := startVMM(v.cmd, j)
	if err != nil {
		return fmt.Errorf("start qemu: %w", err)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		release()
		close(v.exited)
	}()
	_ = os.WriteFile(v.rd.path("qemu.pid"), []byte(strconv.Itoa(v.cmd.Process.Pid)+"\n"), 0o600)
	return nil
}

// acceptCtl waits for QEMU to connect the control port.
func (v *vm) acceptCtl(timeout time.Duration) (*net.UnixConn, error) {
	type res struct {
		c   *net.UnixConn
		err error
	}
	ch := make(chan res, 1)
	_ = v.ctl.SetDeadline(time.Now().Add(timeout))
	go func() {
		c, err := v.ctl.AcceptUnix()
		ch <- res{c, err}
	}()
	select {
	case r := <-ch:
		v.ctl.Close()
		return r.c, r.err
	case <-v.exited:
		v.ctl.Close()
		return nil, fmt.Errorf("qemu exited during start: %v: %s", v.waitErr, v.tail("qemu.log", 600))
	}
}

// shutdown stops QEMU: after grace (the guest may be powering off by itself), a QMP
// quit, then SIGKILL if QEMU still runs. Helpers are stopped last.
func (v *vm) shutdown(grace time.Duration) {
	if v.cmd != nil && v.cmd.Process != nil {
		if !v.waitExit(grace) {
			if v.qmp != nil {
				_ = v.qmp.quit(time.Second)
			}
			if !v.waitExit(2 * time.Second) {
				v.log.Debug("qemu did not quit, killing it")
				_ = proc.KillGroup(v.cmd)
				_ = v.cmd.Process.Kill()
				v.waitExit(5 * time.Second)
			}
		}
	}
	if v.qmp != nil {
		v.qmp.close()
	}
	if v.ctl != nil {
		v.ctl.Close()
	}
	for _, c := range v.fsd {
		done := make(chan struct{})
		go func() { c.Wait(); close(done) }()
		proc.Stop(c, done, 2*time.Second)
	}
	if v.console != nil {
		v.console.close()
	}
}

func (v *vm) waitExit(d time.Duration) bool {
	if d <= 0 {
		select {
		case <-v.exited:
			return true
		default:
			return false
		}
	}
	select {
	case <-v.exited:
		return true
	case <-time.After(d):
		return false
	}
}

// tail returns up to n bytes from the end of a run dir file.
func (v *vm) tail(name string, n int64) string {
	return logfile.Tail(v.rd.path(name), n)
}
