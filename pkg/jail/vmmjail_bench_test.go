package jail_test

import (
	"context"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// BenchmarkVMMJail times whole runs of `true` with --net none, alternating with and
// without the VMM jail (namespaces, mount view, cgroup leaf) so both see the same load;
// it reports each median and their ratio. The target: jailed ≤ 1.05× unjailed.
func BenchmarkVMMJail(b *testing.B) {
	s := jailtest.Spec(b, "true")
	jailtest.HoldAll(b)
	defer jail.SetVMMJail(true)
	var on, off, bootOn, bootOff []time.Duration
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
				on, bootOn = append(on, time.Since(start)), append(bootOn, res.Boot)
			} else {
				off, bootOff = append(off, time.Since(start)), append(bootOff, res.Boot)
			}
		}
	}
	mOn, mOff := medianOf(on), medianOf(off)
	b.ReportMetric(float64(mOn.Milliseconds()), "jailed-ms")
	b.ReportMetric(float64(mOff.Milliseconds()), "unjailed-ms")
	b.ReportMetric(float64(mOn)/float64(mOff), "ratio")
	// Boot runs from QEMU's start to the command's: where the jail's own costs (the view,
	// the cgroup leaf) land.
	b.ReportMetric(float64(medianOf(bootOn).Milliseconds()), "jailed-boot-ms")
	b.ReportMetric(float64(medianOf(bootOff).Milliseconds()), "unjailed-boot-ms")
}
