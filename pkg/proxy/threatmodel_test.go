package proxy

import (
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/readmetest"
)

// TestThreatModelNumbers: the bounds README.md's threat model promises for one
// client of the proxy are the ones this package enforces.
func TestThreatModelNumbers(t *testing.T) {
	text := readmetest.ThreatModel(t)
	for _, tc := range []struct {
		pattern string
		code    int64
	}{
		{`are capped at (\d+) KiB and \d+ s in total`, MaxHeaderBytes >> 10},
		{`are capped at \d+ KiB and (\d+) s in total`, int64(DefaultHeaderTimeout / time.Second)},
		{`each client holds at most (\d+) proxy connections`, DefaultMaxClientConns},
		{`at most (\d+) go to .--secret. hosts`, clientIntercepts},
		{`(\d+) HTTP/2 streams each`, interceptStreams},
		{`a (\d+) KiB window toward the upstream per stream`, upstreamStreamWindow >> 10},
		{`and (\d+) half-MiB send buffers`, clientBufs},
	} {
		if got := readmetest.Number(t, text, tc.pattern); got != tc.code {
			t.Errorf("README.md says %d for %q; the code enforces %d", got, tc.pattern, tc.code)
		}
	}
	// What a client that stops reading pins: every intercepted connection's HTTP/2
	// windows and the client's send buffers. "About" allows rounding up, not down.
	pinned := int64(clientIntercepts*upstreamConnWindow+clientBufs*(512<<10)) >> 20
	if about := readmetest.Number(t, text, `pins at most about (\d+) MiB`); pinned > about || pinned < about*3/4 {
		t.Errorf("README.md says a client pins about %d MiB; the code's bounds come to %d MiB", about, pinned)
	}
}
