package jail_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// BenchmarkSnapshotWorkdir is the README's default run as plain root: `true` with the
// current directory shared read-write, cold (no snapshot) and restored from a snapshot,
// alternately in one run so both see the same load, with every guest slot held so no
// wait for one is timed. The workdir is served over the control session (sharefs), so
// it no longer keeps a run from restoring. The figure is restored ÷ cold at the medians.
func BenchmarkSnapshotWorkdir(b *testing.B) {
	jailtest.Require(b)
	cache, err := os.MkdirTemp("", "crackbox-bench-cache-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(cache) })
	os.Chmod(cache, 0o755)
	wd := b.TempDir()
	jailtest.HoldAll(b)
	run := func(mode string) time.Duration {
		s := jailtest.Spec(b, "true")
		s.MemoryMiB, s.Snapshot, s.CacheDir, s.Workdir = 256, mode, cache, wd
		start := time.Now()
		res, err := jail.Run(context.Background(), s)
		took := time.Since(start)
		if err != nil || res.Exit != 0 || res.Restored != (mode == jail.SnapshotOn) {
			b.Fatalf("%s: exit %d restored %v err %v", mode, res.Exit, res.Restored, err)
		}
		return took
	}
	run(jail.SnapshotOn) // makes the snapshot
	var cold, restored []time.Duration
	for b.Loop() {
		cold = append(cold, run(jail.SnapshotOff))
		restored = append(restored, run(jail.SnapshotOn))
	}
	b.ReportMetric(msOf(medianOf(cold)), "cold-median-ms")
	b.ReportMetric(msOf(medianOf(restored)), "restored-median-ms")
	b.ReportMetric(msOf(slicesMin(cold)), "cold-min-ms")
	b.ReportMetric(msOf(slicesMin(restored)), "restored-min-ms")
	b.ReportMetric(float64(medianOf(restored))/float64(medianOf(cold)), "ratio")
}
