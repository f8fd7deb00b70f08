package dns

import (
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/readmetest"
)

// TestThreatModelNumbers: the DNS responder's bounds in README.md's threat model
// are the ones it enforces.
func TestThreatModelNumbers(t *testing.T) {
	text := readmetest.ThreatModel(t)
	if got := readmetest.Number(t, text, `responder holds at most (\d+) TCP connections`); got != DefaultMaxTCPConns {
		t.Errorf("README.md says %d TCP connections; the code allows %d", got, DefaultMaxTCPConns)
	}
	if got := readmetest.Number(t, text, `each query read within (\d+) s`); got != int64(DefaultReadTimeout/time.Second) {
		t.Errorf("README.md says a query is read within %d s; the code waits %s", got, DefaultReadTimeout)
	}
}
