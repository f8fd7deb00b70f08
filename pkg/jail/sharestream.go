package jail

import (
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"syscall"

	"github.com/crackbox/crackbox/pkg/sharefs"
)

// streamShares serves a run's FSStream shares: each guest stream for a share's tag is
// served by a sharefs server process (chrooted into the share, running as its owner,
// without capabilities, under seccomp). Each share is served once; a guest that opens
// a second stream for the same tag, or one for a tag the run has not, is refused.
type streamShares struct {
	mu     sync.Mutex
	byTag  map[string]streamShare
	served map[string]bool
	quota  int64
	logw   io.Writer
	log    *slog.Logger
	wg     sync.WaitGroup
}

func newStreamShares(p *plan, quota int64, logw io.Writer, log *slog.Logger) *streamShares {
	s := &streamShares{byTag: map[string]streamShare{}, served: map[string]bool{}, quota: quota, logw: logw, log: log}
	for _, sh := range p.userShare {
		if sh.FS == FSStream {
			s.byTag[sh.Tag] = streamShare{share: sh}
		}
	}
	for _, sh := range p.lowers {
		if sh.FS == FSStream {
			s.byTag[sh.Tag] = streamShare{share: sh, lower: true}
		}
	}
	return s
}

// streamShare is a share and whether it is a lower of the root.
type streamShare struct {
	share
	lower bool
}

// serve handles one guest stream; it returns when the share is unmounted or the run ends.
func (s *streamShares) serve(tag string, c net.Conn) {
	s.mu.Lock()
	sh, ok := s.byTag[tag]
	if !ok || s.served[tag] {
		s.mu.Unlock()
		s.log.Warn("share stream refused", "tag", tag, "known", ok)
		c.Close()
		return
	}
	s.served[tag] = true
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	q := s.quota
	if sh.ReadOnly {
		q = 0
	}
	cfg := sharefs.Config{Dir: sh.Host, ReadOnly: sh.ReadOnly, Quota: q, Hide: sh.Hide, Log: s.logw}
	// Through sudo, shares are served as the invoking user, as QEMU ran before; as
	// plain root, as each directory's owner. A host-view lower is read as nobody, so
	// only world-readable files reach the guest.
	switch inv := InvokingUser(); {
	case os.Geteuid() != 0:
	case sh.lower:
		cfg.As = &sharefs.Ident{UID: NobodyUID, GID: NobodyGID}
	case inv.UID != 0:
		cfg.As = &sharefs.Ident{UID: inv.UID, GID: inv.GID}
	}
	if err := sharefs.Serve(cfg, c, s.log); err != nil {
		s.log.Warn("share server", "share", sh.Host, "err", err)
	}
}

// wait waits for every server to end (their streams close with the session).
func (s *streamShares) wait() { s.wg.Wait() }

// diskQuota resolves Spec.DiskQuota.
func diskQuota(q int64) int64 {
	switch {
	case q == 0:
		return DefaultDiskQuota
	case q < 0:
		return 0
	}
	return q
}

// openRunLog opens a log file in the run directory, never through a symlink.
func openRunLog(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
}
