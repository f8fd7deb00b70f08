package jail

import (
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"

	"github.com/crackbox/crackbox/internal/lograte"
	"github.com/crackbox/crackbox/pkg/jail/sharefs"
)

// streamShares serves a run's FSStream shares: each guest stream for a share's tag is
// served by a sharefs server process (chrooted into the share, running as its owner,
// without capabilities, under seccomp). The servers start as soon as the guest
// runs, before it asks for them, so their start-up is off the guest's path. Each share is
// served once; a guest that opens a second stream for the same tag, or one for a tag
// the run has not, is refused.
type streamShares struct {
	mu     sync.Mutex
	byTag  map[string]streamShare
	served map[string]bool
	synced map[string]bool // shares whose changes stream came (workdirsync.go)
	quota  int64
	logw   io.Writer
	log    *slog.Logger
	wg     sync.WaitGroup
	ready  chan struct{} // closed once start has run
	// refusals bounds the warnings about refused streams: the guest names the tag and
	// can ask again at will.
	refusals *slog.Logger
	// lowerAs serves the host view's lowers: the run's own uid when crackbox is root.
	lowerAs *sharefs.Ident
}

// runAs makes the run's own identity (its QEMU's, claimed for this run alone) the one
// that reads the host view's lowers, so no other run or host daemon shares that uid
// with a server the guest drives. Without one (nil, or a placeholder not yet claimed)
// they are read as nobody.
func (s *streamShares) runAs(id *vmmIdentity) {
	if id != nil && id.PerRun && id.claim != nil {
		s.lowerAs = &sharefs.Ident{UID: int(id.UID), GID: int(id.GID)}
	}
}

func newStreamShares(p *plan, quota int64, logw io.Writer, log *slog.Logger) *streamShares {
	s := &streamShares{byTag: map[string]streamShare{}, served: map[string]bool{}, synced: map[string]bool{}, quota: quota, logw: logw, log: log, ready: make(chan struct{}), refusals: lograte.New(lograte.Options{Every: 10 * time.Second, Count: "refused_since_last"}).Logger(log)}
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

// streamShare is a share, whether it is a lower of the root, and its server once started.
type streamShare struct {
	share
	lower  bool
	server *sharefs.Server
}

// start starts every share's server. One that fails to start is left to serve, which
// tries again when the guest mounts the share and reports the error then. Run calls it
// in the background once the guest runs; serve and close wait for it.
func (s *streamShares) start() {
	s.mu.Lock()
	defer s.mu.Unlock()
	defer close(s.ready)
	for tag, sh := range s.byTag {
		srv, err := sharefs.Start(s.config(sh), s.log)
		if err != nil {
			s.log.Warn("share server", "share", sh.Host, "err", err)
			continue
		}
		sh.server = srv
		s.byTag[tag] = sh
	}
}

// config is how sh is served.
func (s *streamShares) config(sh streamShare) sharefs.Config {
	q := s.quota
	if sh.ReadOnly {
		q = 0
	}
	// A share synced at exit is only read over 9p: its changes come as one stream.
	cfg := sharefs.Config{Dir: sh.Host, ReadOnly: sh.ReadOnly || sh.SyncExit, Quota: q, Hide: sh.Hide, Log: s.logw}
	// Through sudo, shares are served as the invoking user, as QEMU ran before; as
	// plain root, as each directory's owner. A host-view lower is read as the run's own
	// uid (else nobody), so only world-readable files reach the guest.
	switch inv := invokingUser(); {
	case os.Geteuid() != 0:
	case sh.lower && s.lowerAs != nil:
		cfg.As = s.lowerAs
	case sh.lower:
		cfg.As = &sharefs.Ident{UID: nobodyUID, GID: nobodyGID}
	case inv.UID != 0:
		cfg.As = &sharefs.Ident{UID: inv.UID, GID: inv.GID}
	}
	return cfg
}

// serve handles one guest stream; it returns when the share is unmounted or the run ends.
func (s *streamShares) serve(tag string, c net.Conn) {
	<-s.ready
	s.mu.Lock()
	sh, ok := s.byTag[tag]
	if !ok || s.served[tag] {
		s.mu.Unlock()
		s.refusals.Warn("share stream refused", "tag", guestText(tag), "known", ok)
		c.Close()
		return
	}
	s.served[tag] = true
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	if sh.server != nil {
		sh.server.Serve(c)
		return
	}
	if err := sharefs.Serve(s.config(sh), c, s.log); err != nil {
		s.log.Warn("share server", "share", sh.Host, "err", err)
	}
}

// close ends the servers of shares the guest never mounted and waits for every server
// to end (the others' streams close with the session).
func (s *streamShares) close() {
	<-s.ready
	s.mu.Lock()
	for tag, sh := range s.byTag {
		if sh.server != nil && !s.served[tag] {
			// Marked served, so a stream arriving now is refused instead of racing.
			s.served[tag] = true
			s.wg.Go(sh.server.Close)
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
}

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
