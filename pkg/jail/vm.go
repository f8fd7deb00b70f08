package jail

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
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
}

func startVM(p *plan, st vmStart, rd *runDir, log *slog.Logger) (_ *vm, err error) {
	v := &vm{rd: rd, exited: make(chan struct{}), log: log}
	defer func() {
		if err != nil {
			v.shutdown(0)
		}
	}()
	var files []*os.File
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	// QEMU runs as a uid that cannot reach a kernel under /root: hand it open files.
	for _, path := range []string{st.kernel, st.initrd} {
		f, err := os.Open(path)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		files = append(files, f)
	}
	cfg := vmConfig{
		Machine: p.machine, Accel: st.accel, CPUs: p.cpus, MemoryMiB: p.memMiB,
		Kernel: "/dev/fd/3", Initrd: "/dev/fd/4", Append: st.append,
		CtlSock: rd.vmPath("ctl.sock"), QMPSock: rd.vmPath("qmp.sock"),
	}
	if st.incoming != nil {
		// Dup it: files is closed once QEMU has started, the caller keeps its own.
		f, err := dupFile(st.incoming)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		cfg.Incoming = "fd:" + strconv.Itoa(2+len(files))
	}
	if st.tap != nil {
		if st.tap.File != nil {
			files = append(files, st.tap.File)
			cfg.TapFD = 2 + len(files)
		} else {
			cfg.TapName = st.tap.Name
		}
	}

	var conW *os.File
	v.console, conW, err = startConsoleLog(rd.path("console.log"), consoleMax)
	if err != nil {
		return nil, err
	}
	defer conW.Close() // QEMU holds its own copy once started
	qlog, err := os.OpenFile(rd.path("qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, err
	}
	defer qlog.Close()

	if st.layout != nil {
		cfg.Shares, cfg.FixedNIC = st.layout, true
	} else if err := v.addLowers(p, &cfg, st.vmm, st.leaf); err != nil {
		return nil, err
	}
	var fsdLog *os.File
	defer func() {
		if fsdLog != nil {
			fsdLog.Close()
		}
	}()
	for i, s := range p.userShare {
		if st.layout != nil {
			break
		}
		if s.FS == FSStream {
			continue // served over the control session, not a device
		}
		vs := vmShare{share: s}
		if s.FS == FSVirtiofs {
			if fsdLog == nil {
				if fsdLog, err = os.OpenFile(rd.path("virtiofsd.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err != nil {
					return nil, err
				}
			}
			vs.Sock = rd.vmPath("fs" + strconv.Itoa(i) + ".sock")
			c, err := startVirtiofsd(s, vs.Sock, st.vmm, fsdLog)
			if err != nil {
				return nil, err
			}
			v.fsd = append(v.fsd, c)
			st.leaf.add(c.Process.Pid)
		}
		cfg.Shares = append(cfg.Shares, vs)
	}

	v.ctl, err = net.ListenUnix("unix", &net.UnixAddr{Name: cfg.CtlSock, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	if st.vmm != nil {
		if err := os.Chown(cfg.CtlSock, int(st.vmm.UID), int(st.vmm.GID)); err != nil {
			return nil, fmt.Errorf("control socket: %w", err)
		}
	}

	args := modularArgs(p, cfg.args())
	log.Debug("qemu start", "args", args)
	// Own process group (a terminal's Ctrl-C reaches crackbox, which forwards it to the
	// command, never QEMU) and a parent-death signal (QEMU dies with crackbox).
	if v.cmd, err = qemuCommand(st, cfg, rd, args); err != nil {
		return nil, err
	}
	v.cmd.Stdout = conW
	v.cmd.Stderr = qlog
	v.cmd.ExtraFiles = files
	v.started = time.Now()
	if err := v.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	go func() {
		v.waitErr = v.cmd.Wait()
		close(v.exited)
	}()
	_ = os.WriteFile(rd.path("qemu.pid"), []byte(strconv.Itoa(v.cmd.Process.Pid)+"\n"), 0o600)
	return v, nil
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
				_ = syscall.Kill(-v.cmd.Process.Pid, syscall.SIGKILL)
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
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
			<-done
		}
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
	return tailFile(v.rd.path(name), n)
}
