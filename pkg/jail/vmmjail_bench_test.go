package jail_test

import (
	"context"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/jailtest"
)

// BenchmarkVMMJail times whole runs of `true` with --net none, alternating with and
// without the VMM jail (namespaces, mount view, cgroup leaf) so both see the same load;
// it reports each median and their ratio. The target: jailed ≤ 1.05× unjailed.
func BenchmarkVMMJail(b *testing.B) {
	s := jailtest.Spec(b, "true")
	jailtest.HoldAll(b)
	defer jail.SetVMMJail(true)
	var on, off []time.Duration
	for b.Loop() {
		for _, jailed := range []bool{true, false} {
			jail.SetVMMJail(jailed)
			start := time.Now()
			res, err := jail.Run(context.Background(), s)
			if err != nil || res.Exit != 0 {
				b.Fatalf("jailed %v: exit %d err %v", jailed, res.Exit, err)
			}
			if !res.Restored {
				b.Logf("jailed %v: booted cold", jailed)
			}
			if jailed {
				on = append(on, time.Since(start))
			} else {
				off = append(off, time.Since(start))
			}
		}
	}
	mOn, mOff := medianOf(on), medianOf(off)
	b.ReportMetric(float64(mOn.Milliseconds()), "jailed-ms")
	b.ReportMetric(float64(mOff.Milliseconds()), "unjailed-ms")
	b.ReportMetric(float64(mOn)/float64(mOff), "ratio")
}
