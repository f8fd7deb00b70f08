package jail_test

import (
	"os"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/jailtest"
)

// BenchmarkSnapshotWorkdir is the README's default run as plain root: `true` with the
// current directory shared read-write, booted cold and restored from a snapshot in one
// run. The workdir is served over the control session (sharefs), so it no longer keeps
// a run from restoring. Report restored ÷ cold of wall-median-ms.
func BenchmarkSnapshotWorkdir(b *testing.B) {
	jailtest.Require(b)
	cache, err := os.MkdirTemp("", "crackbox-bench-cache-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(cache) })
	os.Chmod(cache, 0o755)
	wd := b.TempDir()
	for _, mode := range []string{jail.SnapshotOff, jail.SnapshotOn} {
		b.Run(mode, func(b *testing.B) {
			spec := func() jail.Spec {
				s := jailtest.Spec(b, "true")
				s.MemoryMiB, s.Snapshot, s.CacheDir, s.Workdir = 256, mode, cache, wd
				return s
			}
			if mode == jail.SnapshotOn {
				if res, err := jailtest.Run(b, spec()); err != nil || !res.Restored {
					b.Fatalf("warm-up: restored %v err %v", res.Restored, err)
				}
			}
			var walls []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := jailtest.Run(b, spec())
				walls = append(walls, time.Since(start))
				if err != nil || res.Exit != 0 || res.Restored != (mode == jail.SnapshotOn) {
					b.Fatalf("exit %d restored %v err %v", res.Exit, res.Restored, err)
				}
			}
			b.ReportMetric(msOf(medianOf(walls)), "wall-median-ms")
			b.ReportMetric(msOf(slicesMin(walls)), "wall-min-ms")
		})
	}
}
