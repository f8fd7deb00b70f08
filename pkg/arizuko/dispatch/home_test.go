package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// The big home of the issue: 10,000 files, 100 MiB.
const (
	bigFiles    = 10000
	bigFileSize = 100 << 20 / bigFiles
)

// homeExec is an agent that does what the test asks of each turn: change
// one file, or hold the turn until released.
type homeExec struct {
	mu      sync.Mutex
	write   string // a file to write, "" none
	hold    chan string
	release chan struct{}
}

func (e *homeExec) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	e.mu.Lock()
	write, hold := e.write, e.hold
	e.write = ""
	e.mu.Unlock()
	if write != "" {
		if err := os.WriteFile(filepath.Join(j.HostHome, write), []byte(time.Now().String()), 0o644); err != nil {
			return turn.Result{Exit: 1}, err
		}
	}
	if hold != nil {
		hold <- j.HostHome
		select {
		case <-e.release:
		case <-ctx.Done():
		}
	}
	return turn.Result{}, nil
}

// bigHome is a plane whose folder "big" has the big home committed, and a
// runner whose exec the test steers.
type bigHome struct {
	p    *plane
	r    *Runner
	exec *homeExec
	seed home.Version
}

func newBigHome(tb testing.TB) *bigHome {
	tb.Helper()
	p := newPlane(tb, true, 15*time.Second, nil, nil, "big")
	src := tb.TempDir()
	buf := make([]byte, bigFileSize)
	for i := range bigFiles {
		rand.Read(buf)
		p := filepath.Join(src, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, buf, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	// Seeding is what `arizuko home push` does; parallel publishes keep it short.
	work := make(chan []byte, 64)
	var wg sync.WaitGroup
	var perr error
	var once sync.Once
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for b := range work {
				if _, err := p.setup.Homes.PutChunk(p.ctx, b); err != nil {
					once.Do(func() { perr = err })
				}
			}
		}()
	}
	m, _, _, err := home.Scan(src, nil, home.Limits{}, func(_ string, b []byte) error {
		work <- append([]byte(nil), b...)
		return nil
	})
	close(work)
	wg.Wait()
	if err != nil || perr != nil {
		tb.Fatal(err, perr)
	}
	v, err := p.setup.Homes.Commit(p.ctx, "big", m, home.Version{Source: "push"})
	if err != nil {
		tb.Fatal(err)
	}
	h := &bigHome{p: p, exec: &homeExec{release: make(chan struct{})}, seed: v}
	ctx, cancel := context.WithCancel(p.ctx)
	h.r, err = NewRunner(ctx, RunnerOptions{ID: "admin", Capacity: 1, Setup: p.setup, Client: &Client{URL: p.url, Token: adminToken},
		Exec: h.exec, DataDir: tb.TempDir(), Log: p.log.With("runner", "admin")})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { h.r.Run(ctx); close(done) }()
	tb.Cleanup(func() { close(h.exec.release); cancel(); <-done })
	return h
}

// turn runs one turn of "big" to its end.
func (h *bigHome) turn(tb testing.TB, write string) {
	tb.Helper()
	h.exec.mu.Lock()
	h.exec.write = write
	h.exec.mu.Unlock()
	h.p.post(tb, "big", "go")
	eventually.True(tb, 5*time.Minute, "the turn", func() bool { return h.p.idle(tb) })
}

type homeCounts struct{ fetched, hits, sent float64 }

func (h *bigHome) counts() homeCounts {
	m := h.p.d.metrics
	return homeCounts{value(m.chunks), value(m.hits), value(m.sentChunks)}
}

func value(c prometheus.Counter) float64 {
	var m dto.Metric
	c.Write(&m)
	return m.GetCounter().GetValue()
}

func (c homeCounts) minus(o homeCounts) homeCounts {
	return homeCounts{c.fetched - o.fetched, c.hits - o.hits, c.sent - o.sent}
}

// A home of 10,000 files and 100 MiB: the first turn on a runner fetches
// every chunk once and sends none back; an unchanged home fetches nothing;
// a one-file change sends one chunk and commits a version that changed one
// path.
func TestBigHomeChunkCounts(t *testing.T) {
	h := newBigHome(t)
	c0 := h.counts()
	h.turn(t, "")
	first := h.counts().minus(c0)
	h.turn(t, "")
	unchanged := h.counts().minus(c0).minus(first)
	h.turn(t, "d07/f00007")
	change := h.counts().minus(c0).minus(first).minus(unchanged)
	if first != (homeCounts{fetched: bigFiles}) {
		t.Errorf("first fetch: %+v, want %d chunks fetched, no hit, none sent", first, bigFiles)
	}
	if unchanged != (homeCounts{}) {
		t.Errorf("unchanged home: %+v, want no chunk fetched or sent", unchanged)
	}
	if change != (homeCounts{sent: 1}) {
		t.Errorf("one-file change: %+v, want one chunk sent and nothing fetched", change)
	}
	l, err := h.p.setup.Homes.Log(h.p.ctx, "big")
	if err != nil {
		t.Fatal(err)
	}
	last, _ := l.Latest()
	// Turns that change nothing commit no version.
	if len(l.Versions) != 2 || last.Changed != 1 || last.Files != h.seed.Files || last.Turn == 0 {
		t.Errorf("log %+v, want the push and the turn that changed one file", l.Versions)
	}
}

// The home step at the start of a turn for the unchanged big home: the
// fleet's (ask the control plane for the latest version, find this host's
// copy is it) against a single host's (the folder's directory is there).
// ReportMetric gives p50 per call.
func BenchmarkHomeStepUnchanged(b *testing.B) {
	b.Run("single-host", func(b *testing.B) {
		data := b.TempDir()
		took := make([]time.Duration, 0, b.N)
		for b.Loop() {
			start := time.Now()
			if _, err := folder.EnsureHome(data, "big"); err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
		}
		reportP50(b, took)
	})
	b.Run("fleet", func(b *testing.B) {
		h := newBigHome(b)
		h.turn(b, "") // fetches the home and commits it: this host's copy is current
		// Hold the next turn so its claim stays valid while the step runs again.
		h.exec.mu.Lock()
		h.exec.hold = make(chan string, 1)
		h.exec.mu.Unlock()
		h.p.post(b, "big", "hold")
		dir := <-h.exec.hold
		l, err := readLeaseKV(h.p)
		if err != nil {
			b.Fatal(err)
		}
		c := Claim{Turn: l.Turn, Attempt: l.Attempt, Dispatch: l.Dispatch, Folder: "big"}
		cache := h.r.homeCache()
		latest, _ := h.p.setup.Homes.Log(h.p.ctx, "big")
		v, _ := latest.Latest()
		took := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			cache.SetClean("big", v.Hash) // as the last commit on this host left it
			b.StartTimer()
			start := time.Now()
			ht, err := h.r.pullHome(context.Background(), c, "big", dir)
			if err != nil {
				b.Fatal(err)
			}
			took = append(took, time.Since(start))
			if ht.stats != (HomeStats{}) {
				b.Fatalf("unchanged home fetched %+v", ht.stats)
			}
		}
		reportP50(b, took)
	})
}

func reportP50(b *testing.B, took []time.Duration) {
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)-1].Microseconds())/1000, "max-ms")
}

func readLeaseKV(p *plane) (Lease, error) {
	var l Lease
	e, err := p.setup.Leases.Get(p.ctx, LeaseKey("big"))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(e.Value(), &l)
}

// Whole turns of the big home on one runner, message in to turn finished,
// with an agent that does nothing but the one-file change: the first (every
// chunk fetched, the home written out), an unchanged one, and a one-file
// change (the home scanned with the index, one chunk sent, a version
// committed). Run with -benchtime=1x: each step is reported once.
func BenchmarkBigHomeTurns(b *testing.B) {
	h := newBigHome(b)
	for b.Loop() {
		for _, step := range []struct{ name, write string }{{"first-ms", ""}, {"unchanged-ms", ""}, {"one-file-ms", "d42/f04242"}} {
			start := time.Now()
			h.turn(b, step.write)
			b.ReportMetric(float64(time.Since(start).Microseconds())/1000, step.name)
		}
	}
}
