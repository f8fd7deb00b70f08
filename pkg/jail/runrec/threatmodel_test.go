package runrec

import (
	"testing"

	"github.com/crackbox/crackbox/internal/readmetest"
)

// TestThreatModelNumbers: a run's decision log rotates where README.md's threat
// model says.
func TestThreatModelNumbers(t *testing.T) {
	if got := readmetest.Number(t, readmetest.ThreatModel(t), `decision logs rotate at (\d+) MiB per run`); got != DecisionsMax>>20 {
		t.Errorf("README.md says %d MiB; the code rotates at %d MiB", got, DecisionsMax>>20)
	}
}
