package dispatch

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// noop is an agent that answers at once: what is left is dispatch.
type noop struct{}

func (noop) Run(context.Context, turn.Job) (turn.Result, error) { return turn.Result{}, nil }

// One turn after another through each path: a message in, its turn
// claimed, run by an agent that does nothing, finished. The ratio of the
// two is what the fleet adds to a turn.
func BenchmarkDispatch(b *testing.B) {
	for _, tc := range []struct {
		name  string
		fleet bool
	}{{"local", false}, {"fleet", true}} {
		b.Run(tc.name, func(b *testing.B) {
			p := newPlane(b, tc.fleet, 5*time.Second, nil, noop{}, "a")
			if tc.fleet {
				p.runner(b, "admin", nil, noop{})
			}
			l, q := p.l, p.q
			ctx := service.WithPrincipal(context.Background(), service.AdminPrincipal)
			st := l.Store()
			took := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				start := time.Now()
				if _, err := l.PostMessage(ctx, service.MessageIn{ChatJID: "web:a", Sender: "bench", Text: "go"}); err != nil {
					b.Fatal(err)
				}
				q.Kick("a")
				for {
					w, err := st.PendingWork(ctx)
					if err != nil {
						b.Fatal(err)
					}
					if len(w) == 0 {
						break
					}
					// A fixed fine step, not eventually's growing gap: the gap is the
					// resolution of the latency measured.
					time.Sleep(200 * time.Microsecond)
				}
				took = append(took, time.Since(start))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "turns/s")
		})
	}
}
