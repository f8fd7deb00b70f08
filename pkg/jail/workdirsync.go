package jail

import (
	"fmt"
	"net"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/sharefs"
)

// When the workdir's changes reach the host (Spec.WorkdirSync).
//
// Live serves the workdir read-write over 9p: every metadata operation is a round trip
// to the host, which under TCG costs about a millisecond. Exit serves it read-only as
// the lower layer of an overlay in the guest (cached: the run is taken to be its only
// writer), keeps the command's writes in a guest tmpfs upper layer, and when the
// command ends guest-init sends that layer back as one changes stream, which a share
// server applies under the live share's policy (sharefs.Apply). The host sees nothing
// until the command ends. A run past its timeout has its command killed and syncGrace
// to hand the changes back; a run whose guest is stopped otherwise (the caller
// cancels, crackbox or QEMU is killed, the guest crashes) loses them.
const (
	WorkdirSyncLive = "live"
	WorkdirSyncExit = "exit"
)

// syncGrace is how long a run stopped by its timeout waits for the changes of a
// workdir synced at exit.
const syncGrace = 60 * time.Second

// syncDrain is the session's Drain: syncGrace when the run has a share synced at exit.
func syncDrain(p *plan) time.Duration {
	for _, sh := range p.userShare {
		if sh.SyncExit {
			return syncGrace
		}
	}
	return 0
}

// workdirSync resolves Spec.WorkdirSync.
func workdirSync(s string) (string, error) {
	switch s {
	case "", WorkdirSyncLive:
		return WorkdirSyncLive, nil
	case WorkdirSyncExit:
		return s, nil
	}
	return "", fmt.Errorf("%w: workdir sync %q: use live or exit", ErrBadSpec, s)
}

// sync applies the changes stream of share tag, once, for a share synced at exit; any
// other stream is refused. It returns once the changes are applied and the guest has
// the server's answer: the guest waits for it before it reports the command's exit.
func (s *streamShares) sync(tag string, c net.Conn) {
	<-s.ready
	s.mu.Lock()
	sh, ok := s.byTag[tag]
	if !ok || !sh.SyncExit || s.synced[tag] {
		s.mu.Unlock()
		s.refusals.Warn("sync stream refused", "tag", guestText(tag), "known", ok)
		c.Close()
		return
	}
	s.synced[tag] = true
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	cfg := s.config(sh)
	cfg.ReadOnly = false
	if err := sharefs.Apply(cfg, c, s.log); err != nil {
		s.log.Warn("workdir changes not all applied", "dir", sh.Host, "err", guestText(err.Error()))
	}
}
