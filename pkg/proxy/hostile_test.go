package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// floodLimit is far beyond anything the proxy may read for one request: a
// client that gets this much out unanswered found an unbounded read. A
// trickling client stops after trickleWrites writes, far beyond the header
// timeout the tests set.
const (
	floodLimit    = 32 << 20
	trickleWrites = 3000
)

// hostileResult is what a hostile client saw.
type hostileResult struct {
	status  int
	reason  string
	sent    int
	limit   int
	readErr error
}

// hostile dials addr, writes prefix, then writes chunk every pause (0 = as
// fast as the socket takes it) until a write fails or floodLimit bytes
// are out, while reading whatever answer comes back.
func hostile(t *testing.T, addr, prefix string, chunk []byte, pause time.Duration) hostileResult {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	type answer struct {
		status int
		reason string
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			got <- answer{err: err}
			return
		}
		io.Copy(io.Discard, resp.Body)
		got <- answer{status: resp.StatusCode, reason: resp.Header.Get(ErrorHeader)}
	}()
	limit := floodLimit
	if pause > 0 {
		limit = len(prefix) + trickleWrites*len(chunk)
	}
	sent, _ := io.WriteString(c, prefix)
	for sent < limit {
		n, err := c.Write(chunk)
		sent += n
		if err != nil {
			break
		}
		if pause > 0 {
			time.Sleep(pause) // the scenario: a slow-loris trickle
		}
	}
	a := <-got
	return hostileResult{status: a.status, reason: a.reason, sent: sent, limit: limit, readErr: a.err}
}

func (r hostileResult) expect(t *testing.T, status int, reason string) {
	t.Helper()
	if r.sent >= r.limit {
		t.Errorf("the proxy kept reading: %d bytes went out unanswered", r.sent)
	}
	if r.status != status || r.reason != reason {
		t.Errorf("answer %d %q (read error %v), want %d %q", r.status, r.reason, r.readErr, status, reason)
	}
}

// hostileCase is one flood: prefix, then chunk over and over (pause between writes), from
// a client registered for up.test or not; status and reason are the answer wanted.
type hostileCase struct {
	name       string
	registered bool
	prefix     string
	chunk      []byte
	pause      time.Duration
	status     int
	reason     string
}

// endless is a chunk that never ends a line.
var endless = bytes.Repeat([]byte("a"), 32<<10)

// proxy starts a proxy with a short header timeout for the case's client.
func (tc hostileCase) proxy(t *testing.T) *testProxy {
	var entries []string
	if tc.registered {
		entries = []string{"up.test"}
	}
	return startProxy(t, Options{Hosts: hostsFor("up.test"), HeaderTimeout: 300 * time.Millisecond}, entries)
}

func TestHostileClientsForward(t *testing.T) {
	manyHeaders := bytes.Repeat([]byte("X-Pad: aaaaaaaaaaaaaaaa\r\n"), 1000)
	cases := []hostileCase{
		{"endless request line", true, "GET http://up.test/", endless, 0, 431, ReasonBadRequest},
		{"endless header", true, "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nX-Long: ", endless, 0, 431, ReasonBadRequest},
		{"endless header list", true, "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\n", manyHeaders, 0, 431, ReasonBadRequest},
		{"slowloris", true, "GET http://up.test/ HTTP/1.1\r\nHost: up.test\r\nX-Slow: ", []byte("a"), 10 * time.Millisecond, 408, ReasonBadRequest},
		{"unregistered endless header", false, "GET http://up.test/ HTTP/1.1\r\nX-Long: ", endless, 0, 403, ReasonUnknownClient},
		{"unregistered slowloris", false, "G", []byte("E"), 10 * time.Millisecond, 403, ReasonUnknownClient},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := tc.proxy(t)
			hostile(t, tp.addr, tc.prefix, tc.chunk, tc.pause).expect(t, tc.status, tc.reason)
			d := tp.next(t)
			if d.Reason != tc.reason || d.Host != "" || d.Allowed {
				t.Errorf("decision %+v, want a %s refusal naming no host", d, tc.reason)
			}
		})
	}
}

// TestHostileClientsTransparent sends the same floods to the transparent
// listener, where a plain-HTTP client's Host header is sniffed and a TLS
// client's ClientHello is read before anything is decided.
func TestHostileClientsTransparent(t *testing.T) {
	// A ClientHello announcing the largest allowed size, then fed one
	// handshake byte per record.
	n := maxHelloLen
	helloStart := string([]byte{recordHandshake, 3, 1, 0, 4, typeClientHello, byte(n >> 16), byte(n >> 8), byte(n)})
	oneByteRecord := []byte{recordHandshake, 3, 1, 0, 1, 0}
	cases := []hostileCase{
		{"endless host header", true, "GET / HTTP/1.1\r\nHost: ", endless, 0, 431, ReasonBadRequest},
		{"slowloris http", true, "GET / HTTP/1.1\r\nX-Slow: ", []byte("a"), 10 * time.Millisecond, 408, ReasonBadRequest},
		{"client hello in one-byte records", true, helloStart, oneByteRecord, 0, 0, ""},
		{"slowloris client hello", true, helloStart, oneByteRecord, 10 * time.Millisecond, 0, ""},
		{"unregistered endless header", false, "GET / HTTP/1.1\r\nX-Long: ", endless, 0, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := tc.proxy(t)
			addr := startTransparent(t, tp, bogusDst(80))
			r := hostile(t, addr, tc.prefix, tc.chunk, tc.pause)
			r.expect(t, tc.status, tc.reason)
			if tc.status == 0 && !errors.Is(r.readErr, io.EOF) && !errors.Is(r.readErr, io.ErrUnexpectedEOF) && !isReset(r.readErr) {
				t.Errorf("want the connection closed without an answer, read error %v", r.readErr)
			}
		})
	}
}

func isReset(err error) bool {
	return err != nil && strings.Contains(err.Error(), "connection reset")
}

// TestMaxClientConns holds the per-client limit of connections open and
// checks that one more is refused with a 503 that says why, and that a freed
// slot is usable again. Both listeners share the accept loop that counts.
func TestMaxClientConns(t *testing.T) {
	srv := echoServer(t)
	host := fmt.Sprintf("up.test:%d", portOf(t, srv.URL))
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}, MaxClientConns: 3}, []string{host})
	var held []*rawConn
	for range 3 {
		rc := dialProxy(t, tp.addr)
		// Each held connection is served: its slot is taken, not queued.
		if resp, body := rc.do(t, "GET", get(host, "/")); resp.StatusCode != 200 {
			t.Fatalf("held connection: %d %q", resp.StatusCode, body)
		}
		held = append(held, rc)
	}
	for range 2 {
		over := dialProxy(t, tp.addr)
		resp, body := over.do(t, "GET", get(host, "/"))
		expectRefusal(t, resp, body, http.StatusServiceUnavailable, ReasonTooManyConns)
	}
	held[0].Close()
	// The slot frees once the proxy has seen the close.
	var status int
	var body string
	if !eventually.Within(10*time.Second, func() bool {
		rc := dialProxy(t, tp.addr)
		var resp *http.Response
		resp, body = rc.do(t, "GET", get(host, "/"))
		if status = resp.StatusCode; status != 200 {
			rc.Close()
		}
		return status == 200
	}) {
		t.Fatalf("slot never freed: %d %q", status, body)
	}
}

// TestDefaultMaxClientConns: with the option unset, as the network jail's tap
// mode and proxy serve leave it, a client still meets the default limit.
func TestDefaultMaxClientConns(t *testing.T) {
	tp := startProxy(t, Options{Hosts: hostsFor("up.test")}, []string{"up.test"})
	for range DefaultMaxClientConns {
		c, err := net.Dial("tcp", tp.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
	}
	over := dialProxy(t, tp.addr)
	resp, body := over.do(t, "GET", get("up.test", "/"))
	expectRefusal(t, resp, body, http.StatusServiceUnavailable, ReasonTooManyConns)
}
