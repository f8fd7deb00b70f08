package proxy

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/netip"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

const (
	apiValue = "sk-live-VALUE-api-0123456789"
	gitValue = "ghp_VALUE_git_9876543210"
)

// secretUpstream is a TLS origin for *.example.com that records every request
// it receives and reflects the request headers back in its response headers
// and body. /sse streams one event and waits for release before ending.
type secretUpstream struct {
	srv     *httptest.Server
	port    int
	pool    *x509.CertPool
	mu      sync.Mutex
	seen    []string // "host path?query" + headers, one per request
	release chan struct{}
}

func startSecretUpstream(t testing.TB) *secretUpstream {
	t.Helper()
	u := &secretUpstream{release: make(chan struct{})}
	u.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s?%s\n", r.Proto, r.Host, r.URL.Path, r.URL.RawQuery)
		r.Header.Write(&b)
		u.mu.Lock()
		u.seen = append(u.seen, b.String())
		u.mu.Unlock()
		for k, vs := range r.Header {
			for _, v := range vs {
				w.Header().Add("X-Echo-"+k, v)
			}
		}
		if r.URL.Path == "/early" {
			w.Header().Set("X-Early", r.Header.Get("Authorization"))
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("X-Early")
		}
		if r.URL.Path == "/big" {
			serveBig(w, 64<<20)
			return
		}
		if r.URL.Path == "/slow" {
			// A body of known length whose second half waits for release.
			auth := r.Header.Get("Authorization")
			w.Header().Set("Content-Length", strconv.Itoa(len("data: \n\ndata: end\n\n")+len(auth)))
			io.WriteString(w, "data: "+auth[:12])
			w.(http.Flusher).Flush()
			io.WriteString(w, auth[12:]+"\n")
			w.(http.Flusher).Flush()
			<-u.release
			io.WriteString(w, "\ndata: end\n\n")
			return
		}
		if r.URL.Path == "/sse" {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, "data: "+r.Header.Get("Authorization")[:12])
			w.(http.Flusher).Flush()
			io.WriteString(w, r.Header.Get("Authorization")[12:]+"\n\n")
			w.(http.Flusher).Flush()
			<-u.release
			io.WriteString(w, "data: end\n\n")
			return
		}
		io.WriteString(w, b.String())
	}))
	u.srv.EnableHTTP2 = true
	u.srv.StartTLS()
	t.Cleanup(u.srv.Close)
	u.port = portOf(t, u.srv.URL)
	u.pool = x509.NewCertPool()
	u.pool.AddCert(u.srv.Certificate())
	return u
}

func (u *secretUpstream) requests() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return strings.Join(u.seen, "\n")
}

// injectProxy is a forward proxy whose client holds two secrets: API_KEY
// bound to api.example.com and GIT_TOKEN bound to git.example.com.
func injectProxy(t testing.TB, u *secretUpstream) (*testProxy, *inject.Set, *syncBuffer) {
	t.Helper()
	set, err := inject.New([]inject.Secret{
		{Name: "API_KEY", Hosts: []string{"api.example.com"}, Value: apiValue},
		{Name: "GIT_TOKEN", Hosts: []string{"git.example.com"}, Value: gitValue},
	})
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	names := []string{"api.example.com", "git.example.com", "other.example.com"}
	var entries []string
	for _, n := range names {
		entries = append(entries, fmt.Sprintf("%s:%d", n, u.port))
	}
	entries = append(entries, fmt.Sprintf("127.0.0.1:%d", u.port))
	tp := startProxy(t, Options{
		Hosts: hostsFor(names...), AllowCIDRs: []netip.Prefix{loopback8},
		UpstreamRoots: u.pool, Log: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}, nil)
	l, err := allow.Parse(entries)
	if err != nil {
		t.Fatal(err)
	}
	if err := tp.reg.Register(Client{ID: "sandbox-1", IP: netip.MustParseAddr("127.0.0.1"), Allow: l, Secrets: set}); err != nil {
		t.Fatal(err)
	}
	return tp, set, logs
}

// guestClient goes through the proxy trusting only roots, as a guest would.
func guestClient(tp *testProxy, roots *x509.CertPool, h2 bool) *http.Client {
	proxyURL, _ := urlParse("http://" + tp.addr)
	tr := &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		ForceAttemptHTTP2: h2,
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

func noValue(t *testing.T, what, s string) {
	t.Helper()
	for _, v := range []string{apiValue, gitValue, base64.StdEncoding.EncodeToString([]byte("x:" + gitValue))} {
		if strings.Contains(s, v) {
			t.Fatalf("%s holds a secret value: %q", what, s)
		}
	}
}

func TestInjectBoundHost(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, logs := injectProxy(t, u)
	phAPI, phGit := set.Placeholder("API_KEY"), set.Placeholder("GIT_TOKEN")
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprintf("h2=%v", h2), func(t *testing.T) {
			c := guestClient(tp, set.CA().Pool(), h2)
			defer c.CloseIdleConnections()
			req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/v1?key=%s", u.port, phAPI), nil)
			req.Header.Set("Authorization", "Bearer "+phAPI)
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || (h2 && resp.ProtoMajor != 2) {
				t.Fatalf("status %d proto %s body %q", resp.StatusCode, resp.Proto, body)
			}
			var hdr strings.Builder
			resp.Header.Write(&hdr)
			noValue(t, "response headers", hdr.String())
			noValue(t, "response body", string(body))
			if resp.Header.Get("X-Echo-Authorization") != "Bearer "+phAPI || !strings.Contains(string(body), "key="+phAPI) {
				t.Fatalf("echo not scrubbed back to the placeholder: %v %q", resp.Header, body)
			}
			seen := u.requests()
			wantProto := "HTTP/1.1 api.example.com"
			if h2 {
				wantProto = "HTTP/2.0 api.example.com"
			}
			if !strings.Contains(seen, wantProto) {
				t.Fatalf("upstream not spoken to in the client's protocol: %q", seen)
			}
			if !strings.Contains(seen, "Authorization: Bearer "+apiValue) || !strings.Contains(seen, "key="+apiValue) {
				t.Fatalf("upstream did not get the value: %q", seen)
			}

			// Basic credentials, as git sends them for https://x:TOKEN@host/.
			req, _ = http.NewRequest("GET", fmt.Sprintf("https://x:%s@git.example.com:%d/repo.git/info/refs", phGit, u.port), nil)
			resp, err = c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			hdr.Reset()
			resp.Header.Write(&hdr)
			noValue(t, "basic echo", hdr.String()+string(body))
			want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x:"+gitValue))
			if !strings.Contains(u.requests(), "Authorization: "+want) {
				t.Fatalf("upstream did not get the basic value: %q", u.requests())
			}
		})
	}
	noValue(t, "decision log", tp.log.String())
	noValue(t, "proxy log", logs.String())
}

// A streamed response reaches the client while the upstream still holds the
// stream open, and a value split across two writes is still scrubbed: an
// event stream, and a body of known length that arrives slowly.
func TestInjectStreams(t *testing.T) {
	for _, path := range []string{"/sse", "/slow"} {
		t.Run(path, func(t *testing.T) { testInjectStream(t, path) })
	}
}

func testInjectStream(t *testing.T, path string) {
	u := startSecretUpstream(t)
	// Release the upstream's handler on every path, or closing it waits forever.
	var once sync.Once
	release := func() { once.Do(func() { close(u.release) }) }
	t.Cleanup(release)
	tp, set, _ := injectProxy(t, u)
	ph := set.Placeholder("API_KEY")
	c := guestClient(tp, set.CA().Pool(), false)
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d%s", u.port, path), nil)
	req.Header.Set("Authorization", "Bearer "+ph)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	if line != "data: Bearer "+ph+"\n" {
		t.Fatalf("first event %q", line)
	}
	release()
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: end\n\n" {
		t.Fatalf("rest %q", rest)
	}
}

func TestInjectRefusals(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, logs := injectProxy(t, u)
	phAPI := set.Placeholder("API_KEY")
	other := fmt.Sprintf("other.example.com:%d", u.port)

	// The placeholder in clear text to another allowed host.
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", "GET http://"+other+"/?k="+phAPI+" HTTP/1.1\r\nHost: "+other+"\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonSecretExfiltration)
	if d := tp.next(t); d.Reason != ReasonSecretExfiltration || d.Secret != "API_KEY" {
		t.Fatalf("decision %+v", d)
	}
	// In a header of a plain request.
	rc = dialProxy(t, tp.addr)
	resp, body = rc.do(t, "GET", "GET http://"+other+"/ HTTP/1.1\r\nHost: "+other+"\r\nX-Token: "+phAPI+"\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonSecretExfiltration)
	tp.next(t)
	// In a CONNECT authority, even one that is not allowed.
	rc = dialProxy(t, tp.addr)
	resp, body = rc.do(t, "CONNECT", "CONNECT "+phAPI+".example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonSecretExfiltration)
	tp.next(t)

	// To a bound host, the placeholder of a secret bound elsewhere.
	c := guestClient(tp, set.CA().Pool(), false)
	defer c.CloseIdleConnections()
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://git.example.com:%d/", u.port), nil)
	req.Header.Set("Authorization", "Bearer "+phAPI)
	r2, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r2.Body)
	r2.Body.Close()
	if r2.StatusCode != 403 || r2.Header.Get(ErrorHeader) != ReasonSecretExfiltration {
		t.Fatalf("status %d %v", r2.StatusCode, r2.Header)
	}
	if d := tp.next(t); d.Reason != ReasonSecretExfiltration || d.Secret != "API_KEY" || d.Host != "git.example.com" {
		t.Fatalf("decision %+v", d)
	}
	if strings.Contains(u.requests(), phAPI) {
		t.Fatalf("upstream got the refused request: %q", u.requests())
	}
	lines := tp.log.lines(t)
	for _, l := range lines {
		if l["reason"] != ReasonSecretExfiltration || l["secret"] != "API_KEY" {
			t.Fatalf("decision log line %v", l)
		}
	}
	if len(lines) != 4 {
		t.Fatalf("%d decision log lines, want one per refusal (4)", len(lines))
	}
	// The operator's stderr gets the first at once; the rest are rate limited.
	if n := strings.Count(logs.String(), "proxy refused secret exfiltration"); n != 1 {
		t.Fatalf("%d warnings in %q, want 1", n, logs.String())
	}
	noValue(t, "decision log", tp.log.String())
	noValue(t, "proxy log", logs.String())
}

// A client cannot steer a value to a host it is not bound to: not by naming
// an unbound host in CONNECT and a bound one in SNI, not by connecting to an
// address, not by naming another host inside an intercepted connection.
func TestInjectCannotBeRedirected(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, _ := injectProxy(t, u)
	phAPI := set.Placeholder("API_KEY")
	for _, tc := range []struct{ name, connect string }{
		{"unbound host, bound SNI", fmt.Sprintf("other.example.com:%d", u.port)},
		{"address, bound SNI", fmt.Sprintf("127.0.0.1:%d", u.port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialProxy(t, tp.addr)
			resp, _ := rc.do(t, "CONNECT", "CONNECT "+tc.connect+" HTTP/1.1\r\nHost: "+tc.connect+"\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("CONNECT %d", resp.StatusCode)
			}
			// Trusting the run CA and the upstream's: a plain tunnel shows
			// the upstream's certificate and carries the placeholder as is.
			roots := set.CA().Pool()
			roots.AddCert(u.srv.Certificate())
			tc := tls.Client(rc.Conn, &tls.Config{ServerName: "api.example.com", RootCAs: roots, NextProtos: []string{"http/1.1"}})
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			if !tc.ConnectionState().PeerCertificates[0].Equal(u.srv.Certificate()) {
				t.Fatal("the proxy terminated TLS for an unbound target")
			}
			fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", phAPI)
			b, _ := io.ReadAll(tc)
			if strings.Contains(string(b), apiValue) || !strings.Contains(u.requests(), "Bearer "+phAPI) {
				t.Fatalf("value injected: %q", u.requests())
			}
		})
	}
	t.Run("other host inside a bound connection", func(t *testing.T) {
		c := guestClient(tp, set.CA().Pool(), false)
		defer c.CloseIdleConnections()
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/", u.port), nil)
		req.Host = "other.example.com"
		req.Header.Set("Authorization", "Bearer "+phAPI)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 || strings.Contains(u.requests(), "other.example.com") {
			t.Fatalf("status %d, upstream saw %q", resp.StatusCode, u.requests())
		}
	})
}

// In transparent mode the SNI names the host: a bound one is intercepted,
// and a placeholder in the SNI is refused without a byte reaching upstream.
func TestInjectTransparent(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, _ := injectProxy(t, u)
	addr := startTransparent(t, tp, bogusDst(u.port))
	ph := set.Placeholder("API_KEY")
	dial := func(sni string) (*tls.Conn, error) {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: set.CA().Pool(), NextProtos: []string{"http/1.1"}})
		return tc, tc.Handshake()
	}
	tc, err := dial("api.example.com")
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(tc, "GET / HTTP/1.1\r\nHost: api.example.com\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n", ph)
	b, _ := io.ReadAll(tc)
	noValue(t, "transparent response", string(b))
	if !strings.Contains(string(b), "Bearer "+ph) || !strings.Contains(u.requests(), "Bearer "+apiValue) {
		t.Fatalf("response %q upstream %q", b, u.requests())
	}
	tp.next(t)
	if _, err := dial(ph + ".example.com"); err == nil {
		t.Fatal("handshake with a placeholder SNI succeeded")
	}
	if d := tp.next(t); d.Reason != ReasonSecretExfiltration || d.Secret != "API_KEY" {
		t.Fatalf("decision %+v", d)
	}
}

// An upstream failure is reported without quoting the rewritten request.
func TestInjectUpstreamFailureHidesValue(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, logs := injectProxy(t, u)
	u.srv.Close()
	c := guestClient(tp, set.CA().Pool(), false)
	defer c.CloseIdleConnections()
	resp, err := c.Get(fmt.Sprintf("https://api.example.com:%d/v1?key=%s", u.port, set.Placeholder("API_KEY")))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadGateway || resp.Header.Get(ErrorHeader) != ReasonUpstreamError {
		t.Fatalf("status %d %v %q", resp.StatusCode, resp.Header, body)
	}
	noValue(t, "error body", string(body))
	if d := tp.next(t); d.Reason != ReasonUpstreamError {
		t.Fatalf("decision %+v", d)
	}
	noValue(t, "proxy log", logs.String())
}

// An informational answer that reflects the request does not reach the
// client with the value in it.
func TestInjectEarlyHintsScrubbed(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, _ := injectProxy(t, u)
	ph := set.Placeholder("API_KEY")
	for _, h2 := range []bool{false, true} {
		c := guestClient(tp, set.CA().Pool(), h2)
		var early []string
		trace := &httptrace.ClientTrace{Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
			early = append(early, fmt.Sprint(code, h))
			return nil
		}}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/early", u.port), nil)
		req = req.WithContext(httptrace.WithClientTrace(req.Context(), trace))
		req.Header.Set("Authorization", "Bearer "+ph)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		c.CloseIdleConnections()
		if resp.StatusCode != 200 || !strings.Contains(u.requests(), "Bearer "+apiValue) {
			t.Fatalf("status %d upstream %q", resp.StatusCode, u.requests())
		}
		noValue(t, "1xx headers", strings.Join(early, "\n"))
	}
}
