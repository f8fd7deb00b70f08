package proxy

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
)

// sinkHashServer reads each connection to EOF, then answers with the
// SHA-256 of what it read followed by n pseudo-random bytes of seed n.
func sinkHashServer(t *testing.T, n int) int {
	t.Helper()
	return portOf(t, nettest.Server(t, func(c net.Conn) {
		defer c.Close()
		h := sha256.New()
		if _, err := io.Copy(h, c); err != nil {
			return
		}
		c.Write(h.Sum(nil))
		c.Write(randomBytes(uint64(n), n))
	}))
}

func randomBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// TestTunnelBulkBothWays moves several MiB each way through a CONNECT
// tunnel, which switches both directions to bulk buffers, and checks every
// byte and the half-close in between.
func TestTunnelBulkBothWays(t *testing.T) {
	const size = 6 << 20
	port := sinkHashServer(t, size)
	target := fmt.Sprintf("bulk.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("bulk.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{target})
	rc := dialProxy(t, tp.addr)
	if resp, _ := rc.do(t, "CONNECT", "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	up := randomBytes(7, size)
	werr := make(chan error, 1)
	go func() {
		// Odd-sized writes so reads land on every kind of boundary.
		b := up
		for len(b) > 0 {
			k := min(len(b), 70001)
			if _, err := rc.Write(b[:k]); err != nil {
				werr <- err
				return
			}
			b = b[k:]
		}
		werr <- rc.Conn.(*net.TCPConn).CloseWrite()
	}()
	got, err := io.ReadAll(rc.br)
	if err != nil {
		t.Fatalf("read tunnel: %v", err)
	}
	if err := <-werr; err != nil {
		t.Fatalf("write tunnel: %v", err)
	}
	sum := sha256.Sum256(up)
	if len(got) != sha256.Size+size || !bytes.Equal(got[:sha256.Size], sum[:]) {
		t.Fatalf("upstream saw different bytes (got %d bytes back)", len(got))
	}
	if !bytes.Equal(got[sha256.Size:], randomBytes(uint64(size), size)) {
		t.Fatal("client got different bytes than the upstream sent")
	}
	d := tp.next(t)
	if d.BytesOut != size || d.BytesIn != int64(len("HTTP/1.1 200 Connection established\r\n\r\n")+sha256.Size+size) {
		t.Fatalf("byte counts out=%d in=%d", d.BytesOut, d.BytesIn)
	}
}

// TestIdleTunnelsHoldOnlySockets: an idle tunnel costs the proxy its two
// sockets and nothing else (io.Copy's splice would hold a pipe, two more
// descriptors, per direction while it waits).
func TestIdleTunnelsHoldOnlySockets(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("counts descriptors in /proc/self/fd")
	}
	port := plainEchoServer(t)
	target := fmt.Sprintf("echo.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{target})
	openTunnel(t, tp.addr, target) // warm the pools
	before := countFDs(t)
	const n = 20
	for range n {
		// Each tunnel carries an echo, so both directions have moved
		// bytes and gone back to waiting.
		openTunnel(t, tp.addr, target)
	}
	// Per tunnel: the client socket and the upstream's accepted socket
	// (this process plays both), and the proxy's two. Descriptors of the
	// relays' setup may take a moment to close; a leak never does.
	grew := 0
	if !eventually.Within(10*time.Second, func() bool { grew = countFDs(t) - before; return grew <= 4*n+4 }) {
		t.Fatalf("%d idle tunnels added %d descriptors, want at most %d", n, grew, 4*n+4)
	}
	if tp.Active() != n+1 {
		t.Fatalf("Active() = %d, want %d", tp.Active(), n+1)
	}
}

// plainEchoServer echoes with read/write: io.Copy between sockets would
// splice and hold pipes of its own, which this test counts.
func plainEchoServer(t *testing.T) int {
	t.Helper()
	return portOf(t, nettest.Server(t, func(c net.Conn) {
		defer c.Close()
		b := make([]byte, 512)
		for {
			n, err := c.Read(b)
			if n > 0 {
				c.Write(b[:n])
			}
			if err != nil {
				return
			}
		}
	}))
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestRelayWithoutDescriptors: connections without a socket descriptor
// (a VM control channel stream) relay through the generic path, half-close
// included.
func TestRelayWithoutDescriptors(t *testing.T) {
	upAddr := nettest.Server(t, countingServer)
	p, err := New(Options{}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.Dial("tcp", upAddr)
	if err != nil {
		t.Fatal(err)
	}
	client, far := net.Pipe()
	hc := &halfPipe{Conn: far}
	done := make(chan error, 1)
	go func() {
		_, _, err := p.relay(hc, up, 5*time.Second)
		done <- err
	}()
	client.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(client, "0123456789")
	client.Close()
	// net.Pipe has no half-close; the relay sees EOF on the client side and
	// half-closes the upstream, whose answer then fails to reach the closed
	// pipe. What matters is that the upstream saw EOF and the relay ended.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("relay did not end after the client closed")
	}
	if !hc.closed {
		t.Fatal("relay did not close the client side")
	}
}

// halfPipe records Close so the test can see the relay cleaned up.
type halfPipe struct {
	net.Conn
	closed bool
}

func (h *halfPipe) Close() error { h.closed = true; return h.Conn.Close() }

// countingServer reads a connection to EOF, then answers how many bytes it read.
func countingServer(c net.Conn) {
	defer c.Close()
	b, _ := io.ReadAll(c)
	fmt.Fprintf(c, "got %d bytes", len(b))
}
