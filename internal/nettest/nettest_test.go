package nettest

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

func TestEchoAndPort(t *testing.T) {
	addr := Echo(t)
	if Port(t, addr) == 0 {
		t.Fatalf("no port in %s", addr)
	}
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprint(c, "ping")
	c.(*net.TCPConn).CloseWrite()
	b, err := io.ReadAll(c)
	if err != nil || string(b) != "ping" {
		t.Fatalf("echo gave %q, %v", b, err)
	}
}

// The listener is gone once the test that made it ends.
func TestListenClosedAtCleanup(t *testing.T) {
	var addr string
	t.Run("inner", func(t *testing.T) { addr = Server(t, func(c net.Conn) { c.Close() }) })
	if c, err := net.Dial("tcp", addr); err == nil {
		c.Close()
		t.Fatalf("%s still accepts after cleanup", addr)
	}
}

func TestHoldGuestPorts(t *testing.T) {
	if syscall.Geteuid() != 0 {
		t.Skip("binding :53 needs root")
	}
	HoldGuestPorts(t)
	for _, p := range []string{":3128", ":3129", ":53"} {
		ln, err := net.Listen("tcp", p)
		if err == nil {
			ln.Close()
			t.Errorf("tcp %s is free while held", p)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Errorf("tcp %s: %v", p, err)
		}
	}
}

func TestBufferConcurrentWrites(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() { b.Write([]byte("x")) })
	}
	wg.Wait()
	if b.String() != "xxxxxxxx" {
		t.Fatalf("got %q", b.String())
	}
}

// A port from FreePort is outside the ephemeral range and bindable.
func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 20 {
		p := FreePort(t, "127.0.0.1")
		if p >= ephemeralLow() || p < 1024 {
			t.Fatalf("port %d inside the ephemeral range (from %d) or privileged", p, ephemeralLow())
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			t.Fatalf("port %d: %v", p, err)
		}
		ln.Close()
		seen[p] = true
	}
	if len(seen) < 10 {
		t.Fatalf("only %d distinct ports in 20 picks", len(seen))
	}
}
