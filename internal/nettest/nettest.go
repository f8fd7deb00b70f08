// Package nettest holds the network fixtures tests share: loopback servers that run a
// handler per connection, an echo upstream, a DNS server, the holder of the ports a guest
// dials, a buffer servers may write while the test reads, and simulated hosts in network
// namespaces (hosts.go). Every listener, namespace and link is removed at cleanup.
package nettest

import (
	"bytes"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Listen returns a TCP listener on addr ("127.0.0.1:0" when empty), closed at cleanup.
func Listen(t testing.TB, addr string) net.Listener {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// Serve accepts on ln until it closes and runs handle on each connection in its own
// goroutine; handle owns the connection. It returns ln's address.
func Serve(ln net.Listener, handle func(net.Conn)) string {
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c)
		}
	}()
	return ln.Addr().String()
}

// Server is Serve on a fresh loopback listener.
func Server(t testing.TB, handle func(net.Conn)) string {
	t.Helper()
	return Serve(Listen(t, ""), handle)
}

// Echo is a loopback server that echoes each connection until the client closes it.
func Echo(t testing.TB) string {
	t.Helper()
	return Server(t, func(c net.Conn) {
		defer c.Close()
		io.Copy(c, c)
	})
}

// Port is the port of a host:port address.
func Port(t testing.TB, addr string) int {
	t.Helper()
	_, ps, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(ps)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// HoldGuestPorts opens wildcard listeners on the ports a guest dials (TCP 3128, 3129
// and 53, UDP 53), as squid, a proxy daemon or dnsmasq would. A port some other process
// already holds is just as busy, so EADDRINUSE is fine.
func HoldGuestPorts(t testing.TB) {
	t.Helper()
	for _, p := range []string{":3128", ":3129", ":53"} {
		ln, err := net.Listen("tcp", p)
		if errors.Is(err, syscall.EADDRINUSE) {
			continue
		}
		if err != nil {
			t.Fatalf("hold tcp %s: %v", p, err)
		}
		t.Cleanup(func() { ln.Close() })
		Serve(ln, func(c net.Conn) { c.Close() })
	}
	pc, err := net.ListenPacket("udp", ":53")
	if errors.Is(err, syscall.EADDRINUSE) {
		return
	}
	if err != nil {
		t.Fatalf("hold udp :53: %v", err)
	}
	t.Cleanup(func() { pc.Close() })
}

// Buffer is a bytes.Buffer that servers may write while the test reads it.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// String returns what was written so far.
func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// ServeHTTP serves h on ln (over TLS when cfg is set) until cleanup: the HTTP and
// HTTPS upstreams tests put behind a resolver override.
func ServeHTTP(t testing.TB, ln net.Listener, h http.Handler, cfg *tls.Config) {
	t.Helper()
	if cfg != nil {
		ln = tls.NewListener(ln, cfg)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}
