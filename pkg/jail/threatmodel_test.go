package jail

import (
	"testing"

	"github.com/crackbox/crackbox/internal/readmetest"
)

// TestThreatModelNumbers: the bounds README.md's threat model promises for a
// hostile guest are the ones this package enforces.
func TestThreatModelNumbers(t *testing.T) {
	text := readmetest.ThreatModel(t)
	for _, tc := range []struct {
		pattern string
		code    int64
	}{
		{`serves at most (\d+) guest streams at once`, maxGuestStreams},
		{`holding more than (\d+) more that the host has already closed`, maxClosingStreams},
		{`beyond the (\d+) it has not accepted yet`, acceptBacklog},
		{`one line of printable text of at most (\d+) bytes`, maxGuestText},
	} {
		if got := readmetest.Number(t, text, tc.pattern); got != tc.code {
			t.Errorf("README.md says %d for %q; the code enforces %d", got, tc.pattern, tc.code)
		}
	}
}
