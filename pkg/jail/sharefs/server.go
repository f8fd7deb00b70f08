package sharefs

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/proc"
)

// helperExitGrace is how long a share server may take to exit once its connection
// closed before it is killed.
const helperExitGrace = 2 * time.Second

// Server is one share server process, started before the guest connects so that its
// start-up (two executions of the binary for a root-owned share, chroot, seccomp) does
// not wait on the guest, nor the guest on it. It serves at most one connection.
type Server struct {
	dir   string
	cmd   *exec.Cmd
	local net.Conn // the host end of the helper's socket pair
	log   *slog.Logger
	// exited closes once the helper has been waited for, with waitErr set.
	exited  chan struct{}
	waitErr error
	mu      sync.Mutex
	taken   bool // Serve or Close has claimed the server
}

// Start starts the share server for cfg; it confines itself (see Serve) and then waits
// for the bytes Serve or Close hand it.
func Start(cfg Config, log *slog.Logger) (*Server, error) {
	dir, err := os.OpenFile(cfg.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: share %s: %w", ErrServe, cfg.Dir, err)
	}
	defer dir.Close()
	hc := helperConfig{UID: os.Getuid(), GID: os.Getgid(), ReadOnly: cfg.ReadOnly, Quota: cfg.Quota, Hide: cfg.Hide,
		MemLimit: cmp.Or(cfg.MemLimit, memLimit), Stage: 1, Apply: cfg.Apply}
	if os.Geteuid() == 0 {
		var st unix.Stat_t
		if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
			return nil, fmt.Errorf("%w: share %s: %w", ErrServe, cfg.Dir, err)
		}
		hc.UID, hc.GID, hc.Chroot = int(st.Uid), int(st.Gid), true
		if cfg.As != nil {
			hc.UID, hc.GID = cfg.As.UID, cfg.As.GID
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: socketpair: %w", ErrServe, err)
	}
	lf := os.NewFile(uintptr(pair[0]), "share-host")
	remote := os.NewFile(uintptr(pair[1]), "share-helper")
	defer remote.Close()
	// A net.Conn, so closing it interrupts a copy blocked reading it.
	local, err := net.FileConn(lf)
	lf.Close()
	if err != nil {
		return nil, fmt.Errorf("%w: socketpair: %w", ErrServe, err)
	}

	hc.UserNS = !hc.Chroot
	cmd := helperCommand(hc, remote, dir, cfg.Log, true)
	err = cmd.Start()
	if err != nil && nsRefused(err) {
		// Left in the host's namespaces, the server is still refused every socket and
		// every signal to another process by its filter.
		nsWarned.Do(func() {
			log.Warn("share servers run in the host's namespaces: this host refuses them namespaces of their own", "err", err)
		})
		hc.UserNS = false
		cmd = helperCommand(hc, remote, dir, cfg.Log, false)
		err = cmd.Start()
	}
	if err != nil {
		local.Close()
		return nil, fmt.Errorf("%w: start share server for %s: %w", ErrServe, cfg.Dir, err)
	}
	log.Debug("share server started", "dir", cfg.Dir, "uid", hc.UID, "pid", cmd.Process.Pid, "userns", hc.UserNS)
	s := &Server{dir: cfg.Dir, cmd: cmd, local: local, log: log, exited: make(chan struct{})}
	go func() { s.waitErr = cmd.Wait(); close(s.exited) }()
	return s, nil
}

// helperCommand is the share server's command; ns puts it in namespaces of its own.
func helperCommand(hc helperConfig, conn, dir *os.File, logw io.Writer, ns bool) *exec.Cmd {
	cmd := exec.Command("/proc/self/exe")
	proc.Tie(cmd, syscall.SIGKILL)
	if ns {
		sandbox(cmd, hc)
	}
	b, _ := json.Marshal(hc)
	cmd.Args = []string{"crackbox-share"}
	cmd.Env = []string{envKey + "=" + string(b)}
	cmd.ExtraFiles = []*os.File{conn, dir}
	cmd.Stdout, cmd.Stderr = logw, logw
	return cmd
}

// Serve relays conn to the server until either side closes, then waits for the server
// to exit. conn is closed on return. A second call, or one after Close, only closes conn.
func (s *Server) Serve(conn net.Conn) {
	if !s.take() {
		conn.Close()
		return
	}
	splice(conn, s.local)
	s.end()
}

// Close ends a server that was never handed a connection (the guest did not mount the
// share) and waits for it to exit; after Serve it does nothing.
func (s *Server) Close() {
	if s.take() {
		s.local.Close()
		s.end()
	}
}

// take claims the server for its one Serve or Close; false if it was claimed already.
func (s *Server) take() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.taken {
		return false
	}
	s.taken = true
	return true
}

// end waits for the helper, which exits on EOF of its connection, and kills it if it
// does not within helperExitGrace.
func (s *Server) end() {
	proc.Stop(s.cmd, s.exited, helperExitGrace)
	if err := s.waitErr; err != nil {
		s.log.Warn("share server failed", "dir", s.dir, "err", err)
		return
	}
	s.log.Debug("share server ended", "dir", s.dir)
}
