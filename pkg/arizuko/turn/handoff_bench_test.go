package turn

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// handoffRunner stands in for a guest: it records when each attempt starts
// and exits, and before exiting queues the folder's next message, so every
// folder always has a turn waiting for the one slot.
type handoffRunner struct {
	e      *env
	mu     sync.Mutex
	starts []time.Time
	exits  []time.Time
	left   int
	done   chan struct{}
}

func (r *handoffRunner) Run(ctx context.Context, j Job) (Result, error) {
	r.mu.Lock()
	r.starts = append(r.starts, time.Now())
	r.left--
	more := r.left >= 5
	if r.left == 0 {
		close(r.done)
	}
	r.mu.Unlock()
	if more {
		if _, err := r.e.l.PostMessage(r.e.ctx, service.MessageIn{ChatJID: "web:" + j.Turn.Folder, Text: "next", Platform: "test"}); err != nil {
			return Result{Exit: 1}, err
		}
	}
	time.Sleep(time.Millisecond) // the scenario: the attempt's guest runs for a millisecond
	r.mu.Lock()
	r.exits = append(r.exits, time.Now())
	r.mu.Unlock()
	return Result{}, nil
}

// BenchmarkSlotHandoff measures, with one guest slot and five busy folders,
// the gap between one attempt's guest exit and the next attempt's guest
// start: how long a freed slot sits idle.
func BenchmarkSlotHandoff(b *testing.B) {
	folders := []string{"f0", "f1", "f2", "f3", "f4"}
	e := newEnv(b, "", folders...)
	n := max(b.N, 5)
	r := &handoffRunner{e: e, left: n, done: make(chan struct{})}
	e.start(b, r, func(o *Options) { o.MaxGuests = 1; o.Sweep = time.Hour; o.Log = slog.New(slog.DiscardHandler) })
	b.ResetTimer()
	for _, f := range folders {
		e.post(b, "web:"+f, "first")
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Minute):
		b.Fatal("turns did not finish")
	}
	b.StopTimer()
	r.mu.Lock()
	defer r.mu.Unlock()
	var gaps []time.Duration
	for i := 1; i < len(r.starts) && i-1 < len(r.exits); i++ {
		gaps = append(gaps, r.starts[i].Sub(r.exits[i-1]))
	}
	if len(gaps) == 0 {
		b.Skip("one turn only")
	}
	slices.Sort(gaps)
	pct := func(p float64) float64 { return float64(gaps[int(p*float64(len(gaps)-1))].Microseconds()) / 1000 }
	b.ReportMetric(pct(0.5), "p50-gap-ms")
	b.ReportMetric(pct(0.99), "p99-gap-ms")
	b.ReportMetric(float64(gaps[len(gaps)-1].Microseconds())/1000, "max-gap-ms")
}
