package proxy

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
)

func echoServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestForwardAllowedAndLogged(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("up.test:%d", port)})
	rc := dialProxy(t, tp.addr)
	host := fmt.Sprintf("up.test:%d", port)
	resp, body := rc.do(t, "GET", get(host, "/x"))
	if resp.StatusCode != 200 || body != "hello from "+host+"/x" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	d := tp.next(t)
	if !d.Allowed || d.Reason != "" || d.Host != "up.test" || d.Port != port || d.IP != "127.0.0.1" ||
		d.ClientID != "sandbox-1" || d.Method != "GET" || d.BytesIn == 0 || d.BytesOut == 0 {
		t.Fatalf("decision = %+v", d)
	}
	lines := tp.log.lines(t)
	if len(lines) != 1 {
		t.Fatalf("decision log has %d lines, want 1", len(lines))
	}
	l := lines[0]
	for k, want := range map[string]any{
		"client_id": "sandbox-1", "method": "GET", "host": "up.test", "port": float64(port),
		"ip": "127.0.0.1", "decision": "allow", "reason": "",
	} {
		if l[k] != want {
			t.Errorf("log %s = %v, want %v", k, l[k], want)
		}
	}
	for _, k := range []string{"time", "src", "bytes_in", "bytes_out", "duration_ms"} {
		if _, ok := l[k]; !ok {
			t.Errorf("log line lacks %s: %v", k, l)
		}
	}
	if !strings.HasPrefix(l["src"].(string), "127.0.0.1:") {
		t.Errorf("src = %v", l["src"])
	}
	if _, err := time.Parse(time.RFC3339Nano, l["time"].(string)); err != nil {
		t.Errorf("time %v: %v", l["time"], err)
	}
}

func TestForwardPrivateAddressBlockedWithoutCIDR(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test")}, []string{fmt.Sprintf("up.test:%d", port)})
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", get(fmt.Sprintf("up.test:%d", port), "/"))
	expectRefusal(t, resp, body, 403, ReasonPrivateAddress)
	if d := tp.next(t); d.Allowed || d.Reason != ReasonPrivateAddress {
		t.Fatalf("decision = %+v", d)
	}
	if l := tp.log.lines(t); len(l) != 1 || l[0]["decision"] != "deny" || l[0]["reason"] != ReasonPrivateAddress {
		t.Fatalf("log = %v", l)
	}
}

func TestForwardRedirectNotFollowed(t *testing.T) {
	hit := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hit <- r.URL.Path
		if r.URL.Path == "/go" {
			http.Redirect(w, r, "/target", http.StatusFound)
			return
		}
		io.WriteString(w, "target")
	}))
	defer srv.Close()
	port := portOf(t, srv.URL)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("up.test:%d", port)})
	rc := dialProxy(t, tp.addr)
	resp, _ := rc.do(t, "GET", get(fmt.Sprintf("up.test:%d", port), "/go"))
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/target" {
		t.Fatalf("got %d Location=%q", resp.StatusCode, resp.Header.Get("Location"))
	}
	if p := <-hit; p != "/go" {
		t.Fatalf("upstream saw %q", p)
	}
	select {
	case p := <-hit:
		t.Fatalf("proxy followed the redirect to %q", p)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestForwardStripsHopByHop(t *testing.T) {
	seen := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen <- r.Header.Clone()
		w.Header().Set("Keep-Alive", "timeout=5")
		w.Header().Set("Proxy-Authenticate", "Basic")
		w.Header().Set("Proxy-Whatever", "x")
		w.Header().Set("X-Upstream", "yes")
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	port := portOf(t, srv.URL)
	host := fmt.Sprintf("up.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{host})
	rc := dialProxy(t, tp.addr)
	req := "GET http://" + host + "/ HTTP/1.1\r\nHost: " + host + "\r\n" +
		"Connection: keep-alive, X-Secret-Hop\r\nX-Secret-Hop: 1\r\nKeep-Alive: 300\r\n" +
		"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nProxy-Custom: 1\r\n" +
		"Te: trailers\r\nUpgrade: websocket\r\nTrailer: X-T\r\nX-End-To-End: kept\r\n\r\n"
	resp, body := rc.do(t, "GET", req)
	if resp.StatusCode != 200 || body != "ok" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	h := <-seen
	for _, k := range []string{"X-Secret-Hop", "Keep-Alive", "Proxy-Authorization", "Proxy-Connection",
		"Proxy-Custom", "Te", "Upgrade", "Trailer"} {
		if v, ok := h[k]; ok {
			t.Errorf("upstream saw %s: %q", k, v)
		}
	}
	if c := h.Get("Connection"); c != "" && !strings.EqualFold(c, "close") {
		t.Errorf("upstream saw Connection: %q", c)
	}
	if h.Get("X-End-To-End") != "kept" {
		t.Errorf("end-to-end header lost: %v", h)
	}
	if _, ok := h["User-Agent"]; ok {
		t.Errorf("proxy invented a User-Agent: %q", h.Get("User-Agent"))
	}
	for _, k := range []string{"Keep-Alive", "Proxy-Authenticate", "Proxy-Whatever"} {
		if v := resp.Header.Get(k); v != "" {
			t.Errorf("client saw response %s: %q", k, v)
		}
	}
	if resp.Header.Get("X-Upstream") != "yes" {
		t.Errorf("response header lost")
	}
}

func TestForwardKeepAliveSecondRequestDecidedAlone(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	host := fmt.Sprintf("up.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test", "evil.test"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{host})
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", get(host, "/first"))
	if resp.StatusCode != 200 || resp.Close {
		t.Fatalf("first: %d close=%v %q", resp.StatusCode, resp.Close, body)
	}
	// Same connection, a host that is not listed (and resolves to the
	// same upstream, so only the per-request check can stop it).
	evil := fmt.Sprintf("evil.test:%d", port)
	resp, body = rc.do(t, "GET", get(evil, "/second"))
	expectRefusal(t, resp, body, 403, ReasonAllowlist)
	if !strings.Contains(body, "evil.test") {
		t.Errorf("body does not name the blocked host: %q", body)
	}
	if d := tp.next(t); !d.Allowed {
		t.Fatalf("first decision %+v", d)
	}
	if d := tp.next(t); d.Allowed || d.Host != "evil.test" {
		t.Fatalf("second decision %+v", d)
	}
}

func TestForwardKeepAliveManyRequests(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	host := fmt.Sprintf("up.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{host})
	rc := dialProxy(t, tp.addr)
	for i := range 3 {
		path := fmt.Sprintf("/%d", i)
		resp, body := rc.do(t, "GET", get(host, path))
		if resp.StatusCode != 200 || body != "hello from "+host+path {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	// POST with a body and Expect: 100-continue on the same connection.
	req := "POST http://" + host + "/post HTTP/1.1\r\nHost: " + host + "\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"
	io.WriteString(rc, req)
	resp, err := http.ReadResponse(rc.br, nil)
	if err != nil || resp.StatusCode != 100 {
		t.Fatalf("want 100 Continue, got %v %v", resp, err)
	}
	resp, body := rc.do(t, "POST", "hello")
	if resp.StatusCode != 200 || body != "hello from "+host+"/post" {
		t.Fatalf("post: %d %q", resp.StatusCode, body)
	}
}

func TestForwardCloseDelimitedUpstreamRechunked(t *testing.T) {
	upAddr := nettest.Server(t, func(c net.Conn) {
		defer c.Close()
		http.ReadRequest(bufioReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil-close")
	})
	host := fmt.Sprintf("up.test:%d", portOf(t, upAddr))
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{host})
	rc := dialProxy(t, tp.addr)
	for i := range 2 {
		resp, body := rc.do(t, "GET", get(host, "/"))
		if resp.StatusCode != 200 || body != "until-close" || resp.Close {
			t.Fatalf("request %d: %d %q close=%v", i, resp.StatusCode, body, resp.Close)
		}
	}
}

func TestForwardRefusals(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	cases := []struct {
		name    string
		cidrs   []netip.Prefix
		entries []string
		method  string
		req     string
		status  int
		reason  string
	}{
		{"unlisted host", nil, []string{"up.test"}, "GET", get("other.test", "/"), 403, ReasonAllowlist},
		{"ip literal without cidr", nil, []string{"*"}, "GET", get(fmt.Sprintf("127.0.0.1:%d", port), "/"), 403, ReasonAllowlist},
		{"connect disallowed port", nil, []string{"up.test"}, "CONNECT", "CONNECT up.test:22 HTTP/1.1\r\nHost: up.test:22\r\n\r\n", 403, ReasonPort},
		{"http disallowed port", nil, []string{"up.test"}, "GET", get("up.test:8081", "/"), 403, ReasonPort},
		{"connect unlisted", nil, []string{"up.test"}, "CONNECT", "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n", 403, ReasonAllowlist},
		{"connect ipv6 literal", nil, []string{"*"}, "CONNECT", "CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n", 403, ReasonAllowlist},
		{"connect without port", nil, []string{"up.test"}, "CONNECT", "CONNECT up.test HTTP/1.1\r\nHost: up.test\r\n\r\n", 400, ReasonBadRequest},
		{"origin form", nil, []string{"up.test"}, "GET", "GET / HTTP/1.1\r\nHost: up.test\r\n\r\n", 400, ReasonBadRequest},
		{"https absolute form", nil, []string{"up.test"}, "GET", "GET https://up.test/ HTTP/1.1\r\nHost: up.test\r\n\r\n", 400, ReasonBadRequest},
		{"unknown client", nil, nil, "GET", get("up.test", "/"), 403, ReasonUnknownClient},
		{"private via name", nil, []string{"up.test:" + fmt.Sprint(port)}, "GET", get(fmt.Sprintf("up.test:%d", port), "/"), 403, ReasonPrivateAddress},
		{"upstream refused", []netip.Prefix{loopback8}, []string{"up.test:1"}, "GET", get("up.test:1", "/"), 502, ReasonUpstreamError},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := startProxy(t, Options{Hosts: hostsFor("up.test", "evil.test", "other.test"), AllowCIDRs: tc.cidrs}, tc.entries)
			rc := dialProxy(t, tp.addr)
			resp, body := rc.do(t, tc.method, tc.req)
			expectRefusal(t, resp, body, tc.status, tc.reason)
			if !resp.Close {
				t.Errorf("refusal keeps the connection open")
			}
			if d := tp.next(t); d.Reason != tc.reason {
				t.Errorf("decision reason %q, want %q", d.Reason, tc.reason)
			}
		})
	}
}

// TestForwardIPLiteral: an IP-literal destination passes only when an
// address entry of the client's allowlist names it; allow_cidrs, which lets
// allowed names resolve into a range, never opens a literal.
func TestForwardIPLiteral(t *testing.T) {
	srv := echoServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	port := portOf(t, srv.URL)
	withPort := func(e string) string { return fmt.Sprintf("%s:%d", e, port) }
	connect := func(h string) string { return fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", h, h) }
	cases := []struct {
		name    string
		cidrs   []netip.Prefix
		ports   []int
		entries []string
		method  string
		req     string
		status  int
		reason  string
	}{
		{"allow_cidrs alone does not open a literal", []netip.Prefix{loopback8}, []int{port}, []string{"up.test"}, "GET", get(host, "/ip"), 403, ReasonAllowlist},
		{"name entries never match a literal", []netip.Prefix{loopback8}, []int{port}, []string{"*"}, "CONNECT", connect(host), 403, ReasonAllowlist},
		{"address entry with its port", nil, nil, []string{withPort("127.0.0.1")}, "GET", get(host, "/ip"), 200, ""},
		{"address entry on default ports", nil, []int{port}, []string{"127.0.0.1"}, "CONNECT", connect(host), 200, ""},
		{"address entry on another port", nil, nil, []string{"127.0.0.1"}, "GET", get(host, "/ip"), 403, ReasonPort},
		{"loopback range entry", nil, nil, []string{withPort("127.0.0.0/8")}, "GET", get(host, "/ip"), 200, ""},
		{"a range beyond loopback does not open the host", nil, nil, []string{withPort("0.0.0.0/0")}, "GET", get(host, "/ip"), 403, ReasonPrivateAddress},
		{"name entry port does not open a literal", []netip.Prefix{loopback8}, nil, []string{"example.com:" + fmt.Sprint(port)}, "CONNECT", connect(host), 403, ReasonAllowlist},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := startProxy(t, Options{AllowCIDRs: tc.cidrs, DefaultPorts: tc.ports}, tc.entries)
			rc := dialProxy(t, tp.addr)
			resp, body := rc.do(t, tc.method, tc.req)
			if tc.status != 200 {
				expectRefusal(t, resp, body, tc.status, tc.reason)
			} else if resp.StatusCode != 200 || tc.method == "GET" && body != "hello from "+host+"/ip" {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			rc.Close() // a tunnel's decision is recorded when it ends
			if d := tp.next(t); d.Reason != tc.reason {
				t.Errorf("decision reason %q, want %q", d.Reason, tc.reason)
			}
		})
	}
}

func TestForwardUpstreamTimeout(t *testing.T) {
	hold := make(chan struct{})
	defer close(hold)
	host := fmt.Sprintf("slow.test:%d", portOf(t, nettest.Server(t, func(c net.Conn) { <-hold; c.Close() })))
	tp := startProxy(t, Options{Hosts: hostsFor("slow.test"), AllowCIDRs: []netip.Prefix{loopback8},
		IdleTimeout: 200 * time.Millisecond}, []string{host})
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", get(host, "/"))
	expectRefusal(t, resp, body, http.StatusGatewayTimeout, ReasonUpstreamTimeout)
	if d := tp.next(t); !d.Allowed || d.Reason != ReasonUpstreamTimeout {
		t.Fatalf("decision %+v", d)
	}
}

func TestConnectTLSUpstream(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "secure "+r.Host)
	}))
	defer srv.Close()
	port := portOf(t, srv.URL)
	// The httptest certificate is valid for example.com.
	tp := startProxy(t, Options{Hosts: hostsFor("example.com"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("example.com:%d", port)})
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	proxyURL, _ := urlParse("http://" + tp.addr)
	client := &http.Client{Transport: &http.Transport{
		Proxy:           http.ProxyURL(proxyURL),
		TLSClientConfig: &tls.Config{RootCAs: pool},
	}}
	defer client.CloseIdleConnections()
	for i := range 2 {
		resp, err := client.Get(fmt.Sprintf("https://example.com:%d/", port))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if string(b) != fmt.Sprintf("secure example.com:%d", port) {
			t.Fatalf("request %d: body %q", i, b)
		}
	}
	client.CloseIdleConnections()
	d := tp.next(t)
	if !d.Allowed || d.Method != "CONNECT" || d.BytesIn == 0 || d.BytesOut == 0 || d.IP != "127.0.0.1" {
		t.Fatalf("decision %+v", d)
	}
	if tp.Active() != 0 {
		t.Fatalf("Active() = %d after the tunnel closed", tp.Active())
	}
}
