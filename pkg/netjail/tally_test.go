package netjail

import (
	"slices"
	"testing"

	"github.com/crackbox/crackbox/pkg/dns"
	"github.com/crackbox/crackbox/pkg/proxy"
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
	if got := tl.LearnReport(); got != "crackbox: learn: the command tried to reach no host" {
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
	if got := tl.LearnReport(); got != wantReport {
		t.Errorf("report\n got %q\nwant %q", got, wantReport)
	}
}
