package dispatch

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/jail"
)

// BenchmarkMessageToAgentStartFleet times an accepted message to its agent
// running in a real guest, on one host (the local queue's JailRunner) and
// through the fleet (a work item on a 3-node JetStream cluster, a runner
// taking the lease, claiming over the API and booting the same guest). The
// two take turns in every iteration so background load falls on both alike;
// one warm-up of each comes first. Every guest slot is held, so no slot wait
// is timed. Run with -benchtime=5x; guests are slow.
func BenchmarkMessageToAgentStartFleet(b *testing.B) {
	jenv := jailtest.Require(b)
	jailtest.HoldAll(b)
	type variant struct {
		p       *plane
		started chan time.Time
		n       int
	}
	mk := func(fleet bool) *variant {
		v := &variant{started: make(chan time.Time, 1)}
		jr := &turn.JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetNone, UID: -1, GID: -1,
			Started: func(int64) {
				select {
				case v.started <- time.Now():
				default:
				}
			}}
		if fleet {
			v.p = newPlane(b, true, 10*time.Second, nil, nil)
			v.p.runner(b, "admin", nil, jr)
		} else {
			v.p = newPlane(b, false, 10*time.Second, nil, jr)
		}
		actx := service.WithPrincipal(v.p.ctx, service.AdminPrincipal)
		if _, err := v.p.l.AddFolder(actx, store.Folder{Path: "a", AgentCommand: []string{"true"}}); err != nil {
			b.Fatal(err)
		}
		return v
	}
	vs := map[string]*variant{"local": mk(false), "fleet": mk(true)}
	names := []string{"local", "fleet"}
	run := func(name string) time.Duration {
		v := vs[name]
		posted := time.Now()
		v.p.post(b, "a", fmt.Sprintf("go %d", v.n))
		var d time.Duration
		select {
		case at := <-v.started:
			d = at.Sub(posted)
		case <-time.After(5 * time.Minute):
			b.Fatalf("%s: no agent started", name)
		}
		v.n++
		eventually.True(b, 5*time.Minute, name+" turn to finish", func() bool { return v.p.idle(b) })
		return d
	}
	for _, n := range names {
		run(n)
	}
	got := map[string][]time.Duration{}
	for b.Loop() {
		for _, n := range names {
			got[n] = append(got[n], run(n))
		}
	}
	med := map[string]float64{}
	for _, n := range names {
		v := got[n]
		slices.Sort(v)
		med[n] = float64(v[len(v)/2].Milliseconds())
		b.ReportMetric(med[n], n+"-p50-ms")
		b.ReportMetric(float64(v[len(v)-1].Milliseconds()), n+"-max-ms")
	}
	b.ReportMetric(med["fleet"]/med["local"], "ratio-fleet/local")
}
