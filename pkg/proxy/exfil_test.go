package proxy

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/nettest"
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
// attempt.
func TestExfiltrationWarningsArePerClient(t *testing.T) {
	var buf nettest.Buffer
	p, err := New(Options{Log: slog.New(slog.NewTextHandler(&buf, nil))}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	exfil := func(client string) {
		p.Record(Decision{ClientID: client, Reason: ReasonSecretExfiltration, Secret: "API_KEY", Host: "x.test", Port: 443})
	}
	for range 100 {
		exfil("flooder")
	}
	exfil("other")
	for _, tc := range []struct {
		client string
		want   int
	}{{"flooder", 1}, {"other", 1}} {
		if n := strings.Count(buf.String(), "client="+tc.client+" "); n != tc.want {
			t.Errorf("%d warnings about %s, want %d:\n%s", n, tc.client, tc.want, &buf)
		}
	}
}
