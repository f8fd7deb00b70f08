package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// Sentinel errors for a command that could not be started; the host maps them to the
// shell's 127 and 126.
var (
	ErrNotFound      = errors.New("guest: command not found")
	ErrNotExecutable = errors.New("guest: command not executable")
)

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// process is a started command and the host-facing ends of its stdio.
type process struct {
	pid    int
	ptmx   *os.File // tty mode: the pty master carries stdin and stdout
	pty    ptyControl
	stdin  *os.File // pipe mode: write end of the command's stdin
	stdout *os.File // pipe mode: read end of the command's stdout
	stderr *os.File // pipe mode: read end of the command's stderr
	done   <-chan syscall.WaitStatus
}

// lookPath resolves argv0 against PATH from the command's own environment, not guest-init's.
// A name found only as a non-executable file is ErrNotExecutable, like a shell reports it.
func lookPath(argv0 string, env []string) (string, error) {
	if argv0 == "" {
		return "", fmt.Errorf("%w: empty argv[0]", ErrNotFound)
	}
	if strings.Contains(argv0, "/") {
		return argv0, checkExec(argv0)
	}
	path := defaultPath
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	var notExec error
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		p := filepath.Join(dir, argv0)
		fi, err := os.Stat(p)
		if err != nil {
			continue // missing, or a PATH directory we may not search: a shell skips both
		}
		if !fi.IsDir() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
		if notExec == nil {
			notExec = fmt.Errorf("%w: %s", ErrNotExecutable, p)
		}
	}
	if notExec != nil {
		return "", notExec
	}
	return "", fmt.Errorf("%w: %s (PATH=%s)", ErrNotFound, argv0, path)
}

func checkExec(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%w: %s: %v", ErrNotExecutable, p, err)
		}
		return fmt.Errorf("%w: %s", ErrNotFound, p)
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%w: %s", ErrNotExecutable, p)
	}
	return nil
}

// startErr classifies an exec failure reported by the child after fork.
func startErr(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("%w: %s: %v", ErrNotFound, path, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("%w: %s: %v", ErrNotExecutable, path, err)
	}
	return fmt.Errorf("guest: start %s: %w", path, err)
}

// credential switches identity only when it differs from ours, so the package works
// unprivileged on a host; as root the supplementary groups are always set exactly.
func credential(rs *control.RunSpec) *syscall.Credential {
	if rs.UID == os.Getuid() && rs.GID == os.Getgid() && os.Getuid() != 0 {
		return nil
	}
	groups := make([]uint32, len(rs.Groups))
	for i, g := range rs.Groups {
		groups[i] = uint32(g)
	}
	return &syscall.Credential{Uid: uint32(rs.UID), Gid: uint32(rs.GID), Groups: groups}
}

// start launches the command. The reaper, when set, is the only waiter (PID 1 mode).
func start(rs *control.RunSpec, env []string, r *Reaper) (*process, error) {
	path, dir, err := resolveCommand(rs, env)
	if err != nil {
		return nil, err
	}
	sys := &syscall.SysProcAttr{Credential: credential(rs)}
	if sys.Credential != nil && os.Getuid() != 0 {
		// Checked here: a failed setuid in the child would look like an exec EPERM (126).
		return nil, fmt.Errorf("guest: running as uid %d cannot switch to uid %d gid %d", os.Getuid(), rs.UID, rs.GID)
	}
	p := &process{}
	child, err := p.openStdio(rs, sys) // the command's ends, closed in the parent after start
	if err != nil {
		return nil, err
	}
	attr := &os.ProcAttr{Dir: dir, Env: env, Files: child, Sys: sys}
	launch := func() (int, error) { return p.launch(path, rs.Argv, attr, r == nil) }
	var pid int
	if r != nil {
		pid, p.done, err = r.start(launch)
	} else {
		pid, err = launch()
	}
	closeAll(uniq(child))
	if err != nil {
		p.closeOutputs()
		closeAll([]*os.File{p.stdin})
		return nil, startErr(path, err)
	}
	p.pid = pid
	return p, nil
}

// resolveCommand returns the executable argv[0] names, looked up on the command's PATH
// and relative to its working directory, and that directory ("/" by default).
func resolveCommand(rs *control.RunSpec, env []string) (path, dir string, err error) {
	dir = rs.Dir
	if dir == "" {
		dir = "/"
	}
	argv0 := rs.Argv[0]
	if strings.Contains(argv0, "/") && !filepath.IsAbs(argv0) {
		// ./build.sh is relative to the command's directory, not to guest-init's.
		argv0 = filepath.Join(dir, argv0)
	}
	path, err = lookPath(argv0, env)
	if err != nil {
		return "", "", err
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("guest: working directory %q does not exist in the guest; pick a mounted path", dir)
	}
	return path, dir, nil
}

// openStdio gives the command a terminal (rs.TTY) or three pipes, keeping our ends in p
// and returning the command's ends as its stdin, stdout and stderr.
func (p *process) openStdio(rs *control.RunSpec, sys *syscall.SysProcAttr) ([]*os.File, error) {
	if rs.TTY {
		ptmx, tty, err := openPTY()
		if err != nil {
			return nil, fmt.Errorf("guest: %w", err)
		}
		p.ptmx = ptmx
		p.pty.f = ptmx
		if rs.Rows > 0 && rs.Cols > 0 {
			_ = p.pty.setSize(rs.Rows, rs.Cols)
		}
		sys.Setsid, sys.Setctty, sys.Ctty = true, true, 0
		return []*os.File{tty, tty, tty}, nil
	}
	var fds [6]*os.File
	for i := 0; i < 3; i++ {
		r, w, err := os.Pipe()
		if err != nil {
			closeAll(fds[:])
			return nil, fmt.Errorf("guest: pipe: %w", err)
		}
		fds[2*i], fds[2*i+1] = r, w
	}
	p.stdin, p.stdout, p.stderr = fds[1], fds[2], fds[4]
	sys.Setpgid = true // signals go to the whole job, as a terminal would send them
	return []*os.File{fds[0], fds[3], fds[5]}, nil
}

// launch starts the process. With wait (no reaper) it also waits for it and reports the
// status on p.done; otherwise the reaper is the only waiter and the handle is released.
func (p *process) launch(path string, argv []string, attr *os.ProcAttr, wait bool) (int, error) {
	proc, err := os.StartProcess(path, argv, attr)
	if err != nil {
		if proc != nil && wait {
			_, _ = proc.Wait() // the shim exits at once after reporting
		}
		return 0, err
	}
	pid := proc.Pid // Release clears it
	if !wait {
		_ = proc.Release()
		return pid, nil
	}
	done := make(chan syscall.WaitStatus, 1)
	p.done = done
	go func() {
		st, err := proc.Wait()
		if err != nil {
			done <- syscall.WaitStatus(0xff00) // exit 255: the status was lost
			return
		}
		done <- st.Sys().(syscall.WaitStatus)
	}()
	return pid, nil
}

// signal forwards sig to the foreground job: the tty's foreground process group, or the
// command's own group in pipe mode.
func (p *process) signal(sig int) error {
	pgid := p.pid
	if p.ptmx != nil {
		if g, err := p.pty.foreground(); err == nil && g > 0 {
			pgid = g
		}
	}
	if err := unix.Kill(-pgid, syscall.Signal(sig)); err != nil {
		return unix.Kill(p.pid, syscall.Signal(sig))
	}
	return nil
}

func (p *process) resize(rows, cols uint16) error {
	if p.ptmx == nil {
		return nil
	}
	return p.pty.setSize(rows, cols)
}

// closeOutputs closes the host-facing output ends once they were drained.
func (p *process) closeOutputs() {
	p.pty.close()
	closeAll([]*os.File{p.stdout, p.stderr})
}

// exitOf turns a wait status into the wire form; a signal death also carries 128+sig
// in Code, the value a shell would report.
func exitOf(ws syscall.WaitStatus) control.Exit {
	if ws.Signaled() {
		return control.Exit{Code: 128 + int(ws.Signal()), Signal: int(ws.Signal())}
	}
	return control.Exit{Code: ws.ExitStatus()}
}

func uniq(fs []*os.File) []*os.File {
	var out []*os.File
	for _, f := range fs {
		dup := false
		for _, o := range out {
			dup = dup || o == f
		}
		if !dup {
			out = append(out, f)
		}
	}
	return out
}

func closeAll(fs []*os.File) {
	for _, f := range fs {
		if f != nil {
			f.Close()
		}
	}
}
