package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

var loopback8 = netip.MustParsePrefix("127.0.0.0/8")

// syncBuffer is a decision log sink tests can read while the proxy writes.
type syncBuffer struct{ nettest.Buffer }

func (s *syncBuffer) lines(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(s.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("decision log line %q: %v", l, err)
		}
		out = append(out, m)
	}
	return out
}

// testProxy is a forward proxy on loopback with one registered client
// (127.0.0.1) and a channel of decisions.
type testProxy struct {
	*Proxy
	addr      string
	reg       *Registry
	decisions chan Decision
	log       *syncBuffer
}

// startProxy starts a forward proxy. Options.Hosts, timeouts and CIDRs come
// from opts; entries is the allowlist of client 127.0.0.1 ("" entries are
// dropped, nil entries register no client).
func startProxy(t testing.TB, opts Options, entries []string) *testProxy {
	t.Helper()
	reg := NewRegistry()
	if entries != nil {
		l, err := allow.Parse(entries)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Register(Client{ID: "sandbox-1", IP: netip.MustParseAddr("127.0.0.1"), Allow: l}); err != nil {
			t.Fatal(err)
		}
	}
	tp := &testProxy{reg: reg, decisions: make(chan Decision, 100), log: &syncBuffer{}}
	opts.OnDecision = func(d Decision) { tp.decisions <- d }
	opts.DecisionLog = tp.log
	if opts.DialTimeout == 0 {
		opts.DialTimeout = 2 * time.Second
	}
	if opts.IdleTimeout == 0 {
		opts.IdleTimeout = 5 * time.Second
	}
	p, err := New(opts, reg)
	if err != nil {
		t.Fatal(err)
	}
	tp.Proxy = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp.addr = ln.Addr().String()
	done := make(chan error, 1)
	go func() { done <- p.ServeForward(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		p.Shutdown(ctx)
		select {
		case <-done:
		case <-time.After(2 * time.Second):
			t.Error("ServeForward did not return after Shutdown")
		}
	})
	return tp
}

// next returns the next decision or fails after a timeout.
func (tp *testProxy) next(t *testing.T) Decision {
	t.Helper()
	select {
	case d := <-tp.decisions:
		return d
	case <-time.After(5 * time.Second):
		t.Fatal("no decision recorded")
		return Decision{}
	}
}

// hostsFor maps the given names to 127.0.0.1.
func hostsFor(names ...string) map[string][]netip.Addr {
	m := map[string][]netip.Addr{}
	for _, n := range names {
		m[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return m
}

// portOf returns the port of a URL or host:port.
func portOf(t testing.TB, s string) int {
	t.Helper()
	s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
	_, ps, err := net.SplitHostPort(s)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(ps)
	return p
}

// rawConn is a client connection to the proxy speaking raw HTTP/1.1.
type rawConn struct {
	net.Conn
	br *bufio.Reader
}

func dialProxy(t *testing.T, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return &rawConn{Conn: c, br: bufio.NewReader(c)}
}

// do writes a raw request and reads the response with its body.
func (rc *rawConn) do(t *testing.T, method, raw string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(rc, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(rc.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	if method == "CONNECT" && resp.StatusCode == 200 {
		return resp, "" // what follows is the tunnel, not a body
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	resp.Body.Close()
	return resp, string(body)
}

func get(host, path string) string {
	return "GET http://" + host + path + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n"
}

// expectRefusal checks status, reason header and that the body speaks to an agent.
func expectRefusal(t *testing.T, resp *http.Response, body string, status int, reason string) {
	t.Helper()
	if resp.StatusCode != status {
		t.Errorf("status = %d, want %d (body %q)", resp.StatusCode, status, body)
	}
	if got := resp.Header.Get(ErrorHeader); got != reason {
		t.Errorf("%s = %q, want %q", ErrorHeader, got, reason)
	}
	if status == http.StatusForbidden && !strings.Contains(body, "egress policy blocked") {
		t.Errorf("refusal body does not explain the policy: %q", body)
	}
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }

func urlParse(s string) (*url.URL, error) { return url.Parse(s) }
