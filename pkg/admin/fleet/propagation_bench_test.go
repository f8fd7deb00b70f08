package fleet

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// BenchmarkPropagation registers a client on one of three replicas of a real
// 3-node JetStream cluster and times until each other replica's registry (the
// one its proxy looks every request up in) holds it. Reported: p50 and p99 of
// those times, and of the registration itself.
//
//	go test ./pkg/admin/fleet -run '^$' -bench Propagation -benchtime 300x
func BenchmarkPropagation(b *testing.B) {
	c := natstest.Start(b, 3)
	var reps []*Fleet
	for range 3 {
		reps = append(reps, open(b, c.URL(), Options{}))
	}
	var prop, write []time.Duration
	b.ResetTimer()
	for i := range b.N {
		ip := netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		cl := proxy.Client{ID: fmt.Sprintf("bench-%d", i), IP: ip}
		start := time.Now()
		if err := reps[i%3].Register(cl); err != nil {
			b.Fatal(err)
		}
		write = append(write, time.Since(start))
		for j, r := range reps {
			if j == i%3 {
				continue
			}
			// A fixed fine step, not eventually's growing gap: the gap is the
			// resolution of the latency measured.
			for deadline := start.Add(time.Minute); ; time.Sleep(50 * time.Microsecond) {
				if _, ok := r.reg.Lookup(ip); ok {
					break
				}
				if time.Now().After(deadline) {
					b.Fatalf("replica %d never saw %s", j, ip)
				}
			}
			prop = append(prop, time.Since(start))
		}
	}
	b.StopTimer()
	report := func(ds []time.Duration, name string) {
		slices.Sort(ds)
		at := func(q float64) float64 { return float64(ds[int(q*float64(len(ds)-1))].Microseconds()) / 1000 }
		b.ReportMetric(at(0.50), name+"-p50-ms")
		b.ReportMetric(at(0.99), name+"-p99-ms")
	}
	report(prop, "propagate")
	report(write, "register")
}
