package netjail

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/dns"
)

func TestTallySummary(t *testing.T) {
	blocked := func(host string, port int) proxy.Decision { return proxy.Decision{Host: host, Port: port} }
	tests := []struct {
		name      string
		decisions []proxy.Decision
		queries   []dns.Query
		want      string
	}{
		{"nothing blocked", []proxy.Decision{{Host: "ok.test", Port: 443, Allowed: true}}, nil, ""},
		{"the documented line", []proxy.Decision{
			blocked("evil.test", 443), blocked("example.com", 443), blocked("Example.COM.", 80),
			{Host: "ok.test", Port: 443, Allowed: true},
		}, nil, "crackbox: blocked 3 requests: example.com (2), evil.test (1)"},
		{"one request", []proxy.Decision{blocked("a.test", 443)}, nil, "crackbox: blocked 1 request: a.test (1)"},
		{"non-default port is part of the entry", []proxy.Decision{blocked("git.test", 22), blocked("git.test", 22)}, nil,
			"crackbox: blocked 2 requests: git.test:22 (2)"},
		{"no server name shows the address", []proxy.Decision{{IP: "203.0.113.5", Port: 443, Reason: proxy.ReasonNoServerName}}, nil,
			"crackbox: blocked 1 request: 203.0.113.5:443 (1)"},
		{"dns-only refusals get their own clause", []proxy.Decision{blocked("a.test", 443)}, []dns.Query{
			{Name: "a.test", Type: "A"}, {Name: "b.test", Type: "A"}, {Name: "b.test", Type: "AAAA"},
			{Name: "ok.test", Type: "A", Allowed: true}, {Name: "5.113.0.203.in-addr.arpa", Type: "PTR"},
		}, "crackbox: blocked 1 request: a.test (1); refused DNS for 1 name: b.test"},
		// The line is printed on the operator's terminal: a name that is no host name
		// is quoted, so a C1 control or a bidi override in it does nothing there.
		{"a name with terminal controls is quoted", []proxy.Decision{blocked("ev\u009b2Jil\u202e.com", 443)}, nil,
			`crackbox: blocked 1 request: "ev\u009b2Jil\u202e.com":443 (1)`},
		{"a long bad name is cut", []proxy.Decision{blocked("\u202e"+strings.Repeat("x", 100000), 443)}, nil,
			`crackbox: blocked 1 request: "\u202e` + strings.Repeat("x", maxBadName-3) + `"…:443 (1)`},
		{"dns only", nil, []dns.Query{{Name: "x.test"}, {Name: "y.test"}}, "crackbox: refused DNS for 2 names: x.test, y.test"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tl := NewTally(nil)
			for _, d := range tc.decisions {
				tl.Decision(d)
			}
			for _, q := range tc.queries {
				tl.Query(q)
			}
			if got := tl.Summary(); got != tc.want {
				t.Errorf("summary\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

func TestTallyLearn(t *testing.T) {
	tl := NewTally(nil)
	if got := tl.LearnReport(nil); got != "crackbox: learn: the command tried to reach no host" {
		t.Errorf("empty report %q", got)
	}
	tl.Decision(proxy.Decision{Host: "pypi.org", Port: 443})
	tl.Decision(proxy.Decision{Host: "files.pythonhosted.org", Port: 443})
	tl.Decision(proxy.Decision{Host: "git.test", Port: 9418})
	tl.Decision(proxy.Decision{IP: "203.0.113.1", Port: 443}) // not allowlistable
	tl.Query(dns.Query{Name: "registry.npmjs.org", Type: "A"})
	tl.Query(dns.Query{Name: "pypi.org", Type: "AAAA"})
	want := []string{"files.pythonhosted.org", "git.test:9418", "pypi.org", "registry.npmjs.org"}
	if got := tl.Learned(); !slices.Equal(got, want) {
		t.Fatalf("learned %v, want %v", got, want)
	}
	wantReport := "crackbox: learn: the command tried to reach 4 hosts; to allow them:\n  --allow files.pythonhosted.org,git.test:9418,pypi.org,registry.npmjs.org"
	if got := tl.LearnReport(nil); got != wantReport {
		t.Errorf("report\n got %q\nwant %q", got, wantReport)
	}
}

// TestTallyBounded floods a tally the way a hostile guest can, with a
// fresh name per lookup and per request: what it keeps and what it prints
// stay small, and the summary still says how much there was.
func TestTallyBounded(t *testing.T) {
	tl := NewTally(nil)
	const n = 150_000
	for i := range n {
		tl.Query(dns.Query{Name: fmt.Sprintf("n%d.exfil.test", i), Type: "A"})
		tl.Decision(proxy.Decision{Host: fmt.Sprintf("h%d.exfil.test", i), Port: 443})
	}
	tl.Decision(proxy.Decision{Host: "h7.exfil.test", Port: 443})
	if len(tl.lookups) > maxNames || len(tl.blocked) > maxNames || len(tl.attempted) > maxNames {
		t.Fatalf("tally keeps %d lookups, %d blocked, %d attempted names", len(tl.lookups), len(tl.blocked), len(tl.attempted))
	}
	s := tl.Summary()
	if len(s) > 2048 {
		t.Fatalf("summary is %d bytes", len(s))
	}
	for _, want := range []string{
		fmt.Sprintf("crackbox: blocked %d requests: h7.exfil.test (2), ", n+1),
		"and more than 990 more; refused DNS for more than 1000 names: ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary %q lacks %q", s, want)
		}
	}
	if r := tl.LearnReport(nil); len(r) > 64<<10 || !strings.Contains(r, "more than 1000 hosts") {
		t.Errorf("learn report of %d bytes: %.200q", len(r), r)
	}
}

func TestTallySummaryTopN(t *testing.T) {
	tl := NewTally(nil)
	for i := range 12 {
		for range i + 1 {
			tl.Decision(proxy.Decision{Host: fmt.Sprintf("h%02d.test", i), Port: 443})
		}
	}
	want := "crackbox: blocked 78 requests: h11.test (12), h10.test (11), h09.test (10), h08.test (9), h07.test (8), " +
		"h06.test (7), h05.test (6), h04.test (5), h03.test (4), h02.test (3), and 2 more"
	if got := tl.Summary(); got != want {
		t.Errorf("summary\n got %q\nwant %q", got, want)
	}
}

func TestTallyNamesExfiltration(t *testing.T) {
	tl := NewTally(nil)
	for range 2 {
		tl.Decision(proxy.Decision{Host: "other.test", Port: 80, Reason: proxy.ReasonSecretExfiltration, Secret: "API_KEY"})
	}
	tl.Decision(proxy.Decision{Host: "api.test", Port: 443, Reason: proxy.ReasonSecretExfiltration, Secret: "GH_TOKEN"})
	want := "crackbox: refused 3 attempts to send a secret's placeholder where it is not bound: API_KEY (2), GH_TOKEN (1)"
	if s := tl.Summary(); s != want {
		t.Fatalf("summary %q, want %q", s, want)
	}
	if l := tl.Learned(); len(l) != 0 {
		t.Fatalf("learned %v from refused placeholders", l)
	}
}

// TestTallyRefusedAtDNS: an allowed name the DNS responder refused because of its address
// is named with that address, its class and the fix, though the proxy never saw it.
func TestTallyRefusedAtDNS(t *testing.T) {
	tl := NewTally(nil)
	a := netip.MustParseAddr("198.18.0.5")
	tl.Query(dns.Query{Name: "bench.test", Type: "A", Allowed: true, Rcode: "REFUSED",
		Err: fmt.Errorf("resolve bench.test: %w", &proxy.AddrError{Addr: a, Class: "a benchmarking address (RFC 2544, 198.18.0.0/15)"})})
	want := "crackbox: refused the address of 1 allowed name: bench.test resolves only to 198.18.0.5, a benchmarking address (RFC 2544, 198.18.0.0/15); " +
		"if that address is right, allow it with --allow-cidr 198.18.0.5/32 (or allow_cidrs in crackbox.toml)"
	if got := tl.Summary(); got != want {
		t.Fatalf("summary %q, want %q", got, want)
	}
}
