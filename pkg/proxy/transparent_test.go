package proxy

import (
	"bytes"
	"context"
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

// startTransparent serves transparent connections on loopback as if NAT had
// redirected them from dst (which the proxy must not dial).
func startTransparent(t *testing.T, tp *testProxy, dst netip.AddrPort) string {
	t.Helper()
	return nettest.Server(t, func(c net.Conn) { tp.ServeTransparentConn(c, dst) })
}

// bogusDst is an original destination nobody listens on: reaching the
// upstream proves the proxy dialed the checked name, not this address.
func bogusDst(port int) netip.AddrPort {
	return netip.AddrPortFrom(netip.MustParseAddr("192.0.2.1"), uint16(port))
}

func tlsUpstream(t *testing.T) (*httptest.Server, *x509.CertPool, int) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "tls ok")
	}))
	t.Cleanup(srv.Close)
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	return srv, pool, portOf(t, srv.URL)
}

// tlsGet performs one HTTPS GET over conn and returns the body.
func tlsGet(t *testing.T, conn net.Conn, cfg *tls.Config) (string, error) {
	t.Helper()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	tc := tls.Client(conn, cfg)
	defer tc.Close()
	if err := tc.Handshake(); err != nil {
		return "", err
	}
	io.WriteString(tc, "GET / HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n")
	resp, err := http.ReadResponse(bufioReader(tc), nil)
	if err != nil {
		return "", err
	}
	b, err := io.ReadAll(resp.Body)
	return string(b), err
}

func TestTransparentTLS(t *testing.T) {
	_, pool, port := tlsUpstream(t)
	tp := startProxy(t, Options{Hosts: hostsFor("example.com", "evil.example"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("example.com:%d", port)})
	addr := startTransparent(t, tp, bogusDst(port))

	cases := []struct {
		name       string
		serverName string
		wrap       func(net.Conn) net.Conn
		ok         bool
		reason     string
	}{
		{"allowed sni", "example.com", nil, true, ""},
		{"hello split in 64-byte records with pauses", "example.com",
			func(c net.Conn) net.Conn { return &fragmentingConn{Conn: c, frag: 64, pause: 5 * time.Millisecond} }, true, ""},
		{"unlisted sni", "evil.example", nil, false, ReasonAllowlist},
		{"no sni", "", nil, false, ReasonNoServerName},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wrap != nil {
				c = tc.wrap(c)
			}
			cfg := &tls.Config{RootCAs: pool, ServerName: tc.serverName}
			if tc.serverName == "" {
				cfg = &tls.Config{InsecureSkipVerify: true}
			}
			body, err := tlsGet(t, c, cfg)
			if tc.ok && (err != nil || body != "tls ok") {
				t.Fatalf("got %q, %v", body, err)
			}
			if !tc.ok && err == nil {
				t.Fatalf("handshake through a refused connection succeeded: %q", body)
			}
			d := tp.next(t)
			if d.Allowed != tc.ok || d.Reason != tc.reason || d.Method != "TLS" || d.Port != port {
				t.Fatalf("decision %+v", d)
			}
			if tc.ok && (d.IP != "127.0.0.1" || d.BytesIn == 0 || d.BytesOut == 0) {
				t.Fatalf("decision %+v", d)
			}
		})
	}
}

// TestTransparentLargeSplitHello sends a 16 KiB ClientHello as two records
// in several delayed writes and checks the upstream receives it byte for
// byte, followed by the client's next bytes.
func TestTransparentLargeSplitHello(t *testing.T) {
	hello := records(buildClientHello("big.example.com", 16<<10), 1<<14)
	if len(hello) < 16<<10 {
		t.Fatalf("hello is only %d bytes", len(hello))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b := make([]byte, len(hello)+5)
		_, err = io.ReadFull(c, b)
		got <- b
		io.WriteString(c, "pong")
	}()
	port := portOf(t, ln.Addr().String())
	tp := startProxy(t, Options{Hosts: hostsFor("big.example.com"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("*.example.com:%d", port)})
	addr := startTransparent(t, tp, bogusDst(port))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	for _, chunk := range [][]byte{hello[:3], hello[3:4000], hello[4000:16390], hello[16390:]} {
		if _, err := c.Write(chunk); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // so the hello arrives in separate reads, the case under test
	}
	c.Write([]byte("after"))
	b := <-got
	if !bytes.Equal(b[:len(hello)], hello) || string(b[len(hello):]) != "after" {
		t.Fatalf("upstream got different bytes")
	}
	reply, _ := io.ReadAll(c)
	if string(reply) != "pong" {
		t.Fatalf("reply %q", reply)
	}
	c.Close() // the upstream half-closed; the tunnel ends when we do too
	if d := tp.next(t); !d.Allowed || d.Host != "big.example.com" {
		t.Fatalf("decision %+v", d)
	}
}

func TestTransparentHTTP(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test", "evil.test"), AllowCIDRs: []netip.Prefix{loopback8}},
		[]string{fmt.Sprintf("up.test:%d", port)})
	addr := startTransparent(t, tp, bogusDst(port))

	rc := dialProxy(t, addr)
	resp, body := rc.do(t, "GET", "GET /a HTTP/1.1\r\nHost: up.test\r\n\r\n")
	if resp.StatusCode != 200 || body != "hello from up.test/a" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	// Same connection, another Host: decided on its own.
	resp, body = rc.do(t, "GET", "GET /b HTTP/1.1\r\nHost: evil.test\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonAllowlist)

	rc = dialProxy(t, addr)
	resp, body = rc.do(t, "GET", "GET / HTTP/1.0\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonNoServerName)

	reasons := []string{}
	for range 3 {
		reasons = append(reasons, tp.next(t).Reason)
	}
	if strings.Join(reasons, ",") != ","+ReasonAllowlist+","+ReasonNoServerName {
		t.Fatalf("reasons %q", reasons)
	}
}

func TestTransparentUnknownClientTLS(t *testing.T) {
	_, pool, port := tlsUpstream(t)
	tp := startProxy(t, Options{Hosts: hostsFor("example.com"), AllowCIDRs: []netip.Prefix{loopback8}}, nil)
	addr := startTransparent(t, tp, bogusDst(port))
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tlsGet(t, c, &tls.Config{RootCAs: pool, ServerName: "example.com"}); err == nil {
		t.Fatal("unknown client got through")
	}
	// Dropped before the ClientHello is read, so no name was parsed.
	if d := tp.next(t); d.Reason != ReasonUnknownClient || d.Host != "" || d.Port != port {
		t.Fatalf("decision %+v", d)
	}
}

func TestServeTransparentRejectsUnredirected(t *testing.T) {
	tp := startProxy(t, Options{}, []string{"*"})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tp.ServeTransparent(ln) }()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n")
	// Without a NAT redirect there is no original destination (or it is the
	// proxy itself): the proxy must hang up, not serve.
	b, _ := io.ReadAll(c)
	if len(b) != 0 {
		t.Fatalf("unredirected connection got an answer: %q", b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	tp.Shutdown(ctx)
	if err := <-done; err != nil {
		t.Fatalf("ServeTransparent returned %v", err)
	}
}
