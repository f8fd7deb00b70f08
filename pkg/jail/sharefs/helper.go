package sharefs

import (
	"errors"
	"io"
	"log/slog"
	"net"

	"github.com/crackbox/crackbox/internal/envvar"
)

// envKey marks a process started as a share server; its value is the helperConfig.
const envKey = envvar.ShareServer

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
	// MemLimit is the most memory the server keeps live before it ends the share; 0
	// means memLimit.
	MemLimit int64
	Log      io.Writer
	// Apply makes the server apply one changes stream (apply.go) read from its
	// connection instead of serving 9p, answer with one line, and exit.
	Apply bool
}

// Ident is a uid and gid.
type Ident struct{ UID, GID int }

// helperConfig is what the helper process is told through its environment.
type helperConfig struct {
	UID, GID int
	Chroot   bool // crackbox is root: chroot into the share and drop to the owner
	// UserNS: crackbox is not root and the server has a user namespace of its own,
	// where it holds CAP_SYS_CHROOT (ambient) to chroot into the share and then drops.
	UserNS   bool
	ReadOnly bool
	Quota    int64
	Hide     []string
	MemLimit int64
	Stage    int
	Apply    bool
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
	s, err := Start(cfg, log)
	if err != nil {
		conn.Close()
		return err
	}
	s.Serve(conn)
	return nil
}
