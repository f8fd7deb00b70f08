package turn

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// maxGuarded bounds the refused destinations one attempt reports: a guest
// can try addresses at will, and each becomes an audit row.
const maxGuarded = 16

// guarded collects the destinations a turn's proxy refused as the host's
// own or private, for the operator's audit log.
type guarded struct {
	mu    sync.Mutex
	dests []string
}

func (g *guarded) decision(d proxy.Decision) {
	if d.Reason != proxy.ReasonPrivateAddress {
		return
	}
	dest := d.Host + ":" + strconv.Itoa(d.Port)
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.dests) < maxGuarded && !slices.Contains(g.dests, dest) {
		g.dests = append(g.dests, dest)
	}
}

func (g *guarded) list() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.dests)
}

// auditGuarded writes one audit row per destination the turn's proxy
// refused as the host's own or private, so the operator sees a tenant
// trying to reach the host through its allowlist.
func (q *Queue) auditGuarded(ctx context.Context, f string, dests []string, log *slog.Logger) {
	if q.o.Gate == nil {
		return
	}
	for _, d := range dests {
		err := q.o.Gate.Refuse(ctx, acl.Decision{Principal: "folder:" + f, Action: "network:connect", Scope: f,
			Reason: fmt.Sprintf("the turn's proxy refused %s: a private, loopback or host address (403 %s); only the operator's proxy.allow_cidrs open one", d, proxy.ReasonPrivateAddress)})
		log.Debug("guarded destination audited", "dest", d, "err", err)
	}
}
