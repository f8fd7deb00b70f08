package jail_test

import (
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/jailtest"
)

// BenchmarkRunTrue measures a whole run of `true`: QEMU start, boot, session, teardown.
func BenchmarkRunTrue(b *testing.B) {
	s := jailtest.Spec(b, "true")
	for b.Loop() {
		res, err := jailtest.Run(b, s)
		if err != nil || res.Exit != 0 {
			b.Fatalf("exit %d err %v", res.Exit, err)
		}
		b.ReportMetric(float64(res.Boot.Milliseconds()), "boot-ms")
	}
}
