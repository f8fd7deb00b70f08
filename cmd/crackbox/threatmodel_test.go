package main

import (
	"testing"

	"github.com/crackbox/crackbox/internal/readmetest"
)

// TestThreatModelNumbers: the proxy daemon's decision log rotates where README.md's
// threat model says.
func TestThreatModelNumbers(t *testing.T) {
	if got := readmetest.Number(t, readmetest.ThreatModel(t), `\((\d+) MiB for .proxy serve.\)`); got != daemonDecisionsMax>>20 {
		t.Errorf("README.md says %d MiB; proxy serve rotates at %d MiB", got, daemonDecisionsMax>>20)
	}
}
