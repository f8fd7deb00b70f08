package turn

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
)

// BenchmarkMessageToAgentStart compares the time from an accepted message to
// the agent process running in its guest with a bare jail.Run of the same
// guest (boot to command start), each restored from a snapshot and booted cold.
// The four variants take turns in every iteration so background load falls on
// all alike; one warm-up of each comes first (it makes the snapshots). Run with
// -benchtime=5x; guests are slow.
func BenchmarkMessageToAgentStart(b *testing.B) {
	jenv := jailtest.Require(b)
	modes := []string{jail.SnapshotOn, jail.SnapshotOff}
	jailtest.HoldAll(b)
	bare := func(mode string) time.Duration {
		s := jailtest.Spec(b, "true")
		s.Stdout, s.Stderr = io.Discard, io.Discard
		s.Snapshot = mode
		start := time.Now()
		var started time.Duration
		s.Started = func(int) { started = time.Since(start) }
		if res, err := jail.Run(context.Background(), s); err != nil || res.Restored != (mode == jail.SnapshotOn) {
			b.Fatalf("bare %s: restored %v, err %v", mode, res.Restored, err)
		}
		return started
	}
	type turnEnv struct {
		e         *env
		startedAt chan time.Time
		n         int
	}
	envs := map[string]*turnEnv{}
	for _, mode := range modes {
		te := &turnEnv{e: newEnv(b, "", "bench"), startedAt: make(chan time.Time, 1)}
		runner := &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetNone,
			UID: -1, GID: -1, Snapshot: mode, Started: func(int64) { te.startedAt <- time.Now() }}
		te.e.start(b, runner, nil)
		envs[mode] = te
	}
	turn := func(mode string) time.Duration {
		te := envs[mode]
		posted := time.Now()
		te.e.post(b, "web:bench", fmt.Sprintf("hello %d", te.n))
		d := (<-te.startedAt).Sub(posted)
		te.n++
		te.e.waitTurns(b, "bench", te.n)
		return d
	}
	for _, mode := range modes {
		bare(mode)
		turn(mode)
	}
	got := map[string][]time.Duration{}
	for b.Loop() {
		for _, mode := range modes {
			got["bare-"+mode] = append(got["bare-"+mode], bare(mode))
			got["turn-"+mode] = append(got["turn-"+mode], turn(mode))
		}
	}
	med := map[string]float64{}
	for k, v := range got {
		slices.Sort(v)
		med[k] = float64(v[len(v)/2].Milliseconds())
		b.ReportMetric(med[k], k+"-ms")
	}
	b.ReportMetric(med["turn-on"]/med["bare-on"], "ratio-restored")
	b.ReportMetric(med["turn-off"]/med["bare-off"], "ratio-cold")
	b.ReportMetric(med["turn-on"]/med["turn-off"], "turn-restored/cold")
}

// BenchmarkTurnsPerMinute keeps 5 folders busy and reports sustained turns
// per minute (guest slots are capped machine-wide by jailtest).
func BenchmarkTurnsPerMinute(b *testing.B) {
	jenv := jailtest.Require(b)
	folders := []string{"f0", "f1", "f2", "f3", "f4"}
	e := newEnv(b, "", folders...)
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetNone, UID: -1, GID: -1}}
	e.start(b, runner, nil)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, len(folders))
	for i, f := range folders {
		n := b.N / len(folders)
		if i < b.N%len(folders) {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range n {
				if _, err := e.l.PostMessage(e.ctx, service.MessageIn{ChatJID: "web:" + f, Text: fmt.Sprintf("msg %d", j), Platform: "test"}); err != nil {
					errs <- err
					return
				}
				e.q.Kick(f)
				if !eventually.Within(5*time.Minute, func() bool { return countEnded(e, f) >= j+1 }) {
					errs <- fmt.Errorf("%s: turn %d did not end", f, j)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Minutes(), "turns/min")
	ts, _ := e.st.ListTurns(context.Background(), "", 1000)
	for _, x := range ts {
		if x.Status != store.TurnDone || !strings.HasPrefix(x.Outcome, "ok") {
			b.Fatalf("turn %+v", x)
		}
	}
}

func countEnded(e *env, f string) int {
	ts, _ := e.st.ListTurns(context.Background(), f, 1000)
	n := 0
	for _, x := range ts {
		if x.Status == store.TurnDone || x.Status == store.TurnFailed {
			n++
		}
	}
	return n
}
