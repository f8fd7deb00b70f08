package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// result holds everything measured for one target. Zero durations and
// rates mean "not measured" (a failed phase records its error instead).
type result struct {
	Target target `json:"target"`

	ThroughputBytes int64   `json:"throughput_bytes"`
	ThroughputMiBs  float64 `json:"throughput_mib_s"`
	ThroughputCPU   float64 `json:"throughput_proxy_cpu_s"`
	ThroughputSelf  float64 `json:"throughput_bench_cpu_s"` // client and upstream

	RateTunnels int     `json:"rate_tunnels"`
	RateErrors  int     `json:"rate_errors"`
	RatePerSec  float64 `json:"rate_per_s"`
	RateCPU     float64 `json:"rate_proxy_cpu_s"`
	RateSelfCPU float64 `json:"rate_bench_cpu_s"` // client and upstream

	LoadP50 time.Duration `json:"load_p50_ns"`
	LoadP99 time.Duration `json:"load_p99_ns"`

	SeqP50 time.Duration `json:"seq_p50_ns"`
	SeqP99 time.Duration `json:"seq_p99_ns"`

	IdleWanted  int     `json:"idle_wanted"`
	IdleOpened  int     `json:"idle_opened"`
	RSSBaseMiB  float64 `json:"rss_base_mib"`
	RSSIdleMiB  float64 `json:"rss_idle_mib"`
	IdleOpenSec float64 `json:"idle_open_s"`
	IdleFDs     int     `json:"idle_fds"`

	DenyChecked bool     `json:"deny_checked"`
	Errors      []string `json:"errors,omitempty"`
}

func (r *result) fail(phase string, err error) {
	msg := fmt.Sprintf("%s: %v", phase, err)
	r.Errors = append(r.Errors, msg)
	slog.Warn("phase error", "target", r.Target.Name, "phase", phase, "err", err)
}

// cpu returns the proxy's CPU seconds so far, or 0 for direct.
func (r *result) cpu() float64 {
	if r.Target.PID == 0 {
		return 0
	}
	s, _ := treeCPU(r.Target.PID)
	return s
}

type bench struct {
	upstream    string
	up          *upstream
	opTimeout   time.Duration
	concurrency int
}

// warm runs a few round trips so first-use costs (lazy allocation, DNS
// caches, thread pools) are not measured.
func (b *bench) warm(r *result, n int) {
	for i := 0; i < n; i++ {
		if _, err := roundTrip(r.Target, b.upstream, b.opTimeout); err != nil {
			r.fail("warm-up", err)
			return
		}
	}
}

// checkDeny makes sure a proxy enforces its allowlist: a CONNECT to a name
// outside it must be refused, or the comparison is not like for like.
func (b *bench) checkDeny(r *result, name string) {
	if r.Target.direct() {
		return
	}
	t := r.Target
	t.Host = name
	tn, err := open(t, b.upstream, time.Now().Add(b.opTimeout))
	if err == nil {
		tn.Close()
		r.fail("allowlist", fmt.Errorf("CONNECT %s was let through", name))
		return
	}
	if !errors.Is(err, errRefused) {
		r.fail("allowlist", fmt.Errorf("CONNECT %s: want a refusal, got %w", name, err))
		return
	}
	r.DenyChecked = true
}

func (b *bench) throughput(r *result, n int64) {
	cpu0, self0 := r.cpu(), selfCPU()
	d, err := download(r.Target, b.upstream, n, 10*b.opTimeout)
	if err != nil {
		r.fail("throughput", err)
		return
	}
	mibs := float64(n) / (1 << 20) / d.Seconds()
	// Keep the best of several rounds: interference only ever slows a run down.
	if mibs > r.ThroughputMiBs {
		r.ThroughputBytes, r.ThroughputMiBs, r.ThroughputCPU = n, mibs, r.cpu()-cpu0
		r.ThroughputSelf = selfCPU() - self0
	}
}

// rate opens n short tunnels with b.concurrency clients and adds the count,
// wall time and per-tunnel latencies to acc.
func (b *bench) rate(r *result, n int, acc *rateAcc) {
	cpu0, self0 := r.cpu(), selfCPU()
	var next atomic.Int64
	var mu sync.Mutex
	lat := make([]time.Duration, 0, n)
	var errs int
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < b.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				d, err := roundTrip(r.Target, b.upstream, b.opTimeout)
				mu.Lock()
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
				} else {
					lat = append(lat, d)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	acc.wall += time.Since(start)
	acc.cpu += r.cpu() - cpu0
	acc.self += selfCPU() - self0
	acc.lat = append(acc.lat, lat...)
	acc.errs += errs
	if firstErr != nil {
		r.fail("rate", fmt.Errorf("%d of %d tunnels failed, first: %w", errs, n, firstErr))
	}
}

type rateAcc struct {
	wall time.Duration
	cpu  float64
	self float64
	lat  []time.Duration
	errs int
}

func (r *result) setRate(a *rateAcc) {
	r.RateTunnels, r.RateErrors, r.RateCPU, r.RateSelfCPU = len(a.lat), a.errs, a.cpu, a.self
	if a.wall > 0 {
		r.RatePerSec = float64(len(a.lat)) / a.wall.Seconds()
	}
	r.LoadP50, r.LoadP99 = percentile(a.lat, 50), percentile(a.lat, 99)
}

// sequential measures one tunnel at a time, alternating between targets on
// every sample so background load hits all of them alike.
func (b *bench) sequential(rs []*result, n int) {
	lat := make([][]time.Duration, len(rs))
	failed := make([]bool, len(rs))
	for i := 0; i < n; i++ {
		for j, r := range rs {
			if failed[j] {
				continue
			}
			d, err := roundTrip(r.Target, b.upstream, b.opTimeout)
			if err != nil {
				r.fail("latency", err)
				failed[j] = true
				continue
			}
			lat[j] = append(lat[j], d)
		}
	}
	for j, r := range rs {
		r.SeqP50, r.SeqP99 = percentile(lat[j], 50), percentile(lat[j], 99)
	}
}

// idle holds n tunnels open through the proxy, reads its RSS, then closes
// them from the upstream side.
func (b *bench) idle(r *result, n int, settle time.Duration) {
	r.IdleWanted = n
	base, err := treeRSS(r.Target.PID)
	if err != nil {
		r.fail("idle", err)
		return
	}
	r.RSSBaseMiB = mib(base)

	conns := make([]*tunnel, n)
	var next atomic.Int64
	var failures atomic.Int64
	var errOnce sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < b.concurrency; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || failures.Load() > 100 {
					return
				}
				tn, err := hold(r.Target, b.upstream, b.opTimeout)
				if err != nil {
					failures.Add(1)
					errOnce.Do(func() { r.fail("idle", fmt.Errorf("open tunnel %d: %w", i, err)) })
					continue
				}
				conns[i] = tn
			}
		}()
	}
	wg.Wait()
	r.IdleOpenSec = time.Since(start).Seconds()
	for _, c := range conns {
		if c != nil {
			r.IdleOpened++
		}
	}
	time.Sleep(settle)
	r.IdleFDs = treeFDs(r.Target.PID)
	if rss, err := treeRSS(r.Target.PID); err != nil {
		r.fail("idle", err)
	} else {
		r.RSSIdleMiB = mib(rss)
	}
	b.up.release()
	for _, c := range conns {
		if c != nil {
			c.Close()
		}
	}
}

func selfCPU() float64 {
	s, _ := treeCPU(os.Getpid())
	return s
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
