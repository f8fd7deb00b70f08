package sharefs

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// envKey marks a process started as a share server; its value is the helperConfig.
const envKey = "CRACKBOX_SHARE_SERVER"

// ErrServe wraps every failure to start or run a share server.
var ErrServe = errors.New("sharefs")

// Config is one share to serve.
type Config struct {
	Dir      string // the host directory, already resolved and checked by the caller
	ReadOnly bool
	Quota    int64 // bytes the share may grow by during the run; 0 = unbounded
	// As is who serves the share when crackbox runs as root; nil = the directory's
	// owner. Ignored otherwise: an unprivileged crackbox serves as itself.
	As *Ident
	// Hide lists paths relative to Dir that the guest can neither open nor list, as
	// if they did not exist (the host view's secrets).
	Hide []string
	Log  io.Writer
}

// Ident is a uid and gid.
type Ident struct{ UID, GID int }

// helperConfig is what the helper process is told through its environment.
type helperConfig struct {
	UID, GID int
	Chroot   bool // crackbox is root: chroot into the share and drop to the owner
	ReadOnly bool
	Quota    int64
	Hide     []string
	Stage    int
}

// The helper's inherited descriptors.
const (
	connFD = 3 // the 9p byte stream
	dirFD  = 4 // O_PATH fd of the share's root
)

// Serve serves one guest connection for cfg.Dir until either side closes it. The
// 9p server runs in a new process: when crackbox runs as root it is chrooted into the
// share and runs as cfg.As (else the directory's owner) without capabilities; otherwise
// it runs as crackbox's own user. Both install the seccomp filter of seccomp.go.
func Serve(cfg Config, conn net.Conn, log *slog.Logger) error {
	defer conn.Close()
	dir, err := os.OpenFile(cfg.Dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: share %s: %w", ErrServe, cfg.Dir, err)
	}
	defer dir.Close()
	hc := helperConfig{UID: os.Getuid(), GID: os.Getgid(), ReadOnly: cfg.ReadOnly, Quota: cfg.Quota, Hide: cfg.Hide, Stage: 1}
	if os.Geteuid() == 0 {
		var st unix.Stat_t
		if err := unix.Fstat(int(dir.Fd()), &st); err != nil {
			return fmt.Errorf("%w: share %s: %w", ErrServe, cfg.Dir, err)
		}
		hc.UID, hc.GID, hc.Chroot = int(st.Uid), int(st.Gid), true
		if cfg.As != nil {
			hc.UID, hc.GID = cfg.As.UID, cfg.As.GID
		}
	}
	pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: socketpair: %w", ErrServe, err)
	}
	lf := os.NewFile(uintptr(pair[0]), "share-host")
	remote := os.NewFile(uintptr(pair[1]), "share-helper")
	// A net.Conn, so closing it interrupts a copy blocked reading it.
	local, err := net.FileConn(lf)
	lf.Close()
	if err != nil {
		remote.Close()
		return fmt.Errorf("%w: socketpair: %w", ErrServe, err)
	}
	defer local.Close()

	b, _ := json.Marshal(hc)
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"crackbox-share"}
	cmd.Env = []string{envKey + "=" + string(b)}
	cmd.ExtraFiles = []*os.File{remote, dir}
	cmd.Stdout, cmd.Stderr = cfg.Log, cfg.Log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	err = cmd.Start()
	remote.Close()
	if err != nil {
		return fmt.Errorf("%w: start share server for %s: %w", ErrServe, cfg.Dir, err)
	}
	log.Debug("share server started", "dir", cfg.Dir, "uid", hc.UID, "pid", cmd.Process.Pid)
	splice(conn, local)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err = <-done:
	case <-time.After(2 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		err = <-done
	}
	log.Debug("share server ended", "dir", cfg.Dir, "err", err)
	return nil
}
