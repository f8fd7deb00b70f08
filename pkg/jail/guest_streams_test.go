package jail

import (
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/control"
)

// A guest that opens proxy streams without end gets maxGuestStreams served at once;
// the rest are closed instead of each costing the host a goroutine.
func TestGuestStreamsAreCapped(t *testing.T) {
	hostEnd, guestEnd := net.Pipe()
	host, err := control.Client(hostEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer host.Close()
	g, err := control.Server(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()

	var served atomic.Int32
	release := make(chan struct{})
	defer close(release)
	go acceptGuestStreams(host, sessionHooks{
		ProxyConn: func(c net.Conn) {
			served.Add(1)
			<-release
			c.Close()
		},
		Log: slog.New(slog.DiscardHandler),
	})

	const extra = 5
	var refused int
	for i := range maxGuestStreams + extra {
		c, err := control.Open(g, control.KindProxy)
		if err != nil {
			t.Fatalf("open stream %d: %v", i, err)
		}
		if i < maxGuestStreams {
			continue
		}
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF {
			refused++
		} else {
			t.Errorf("stream %d past the cap: read err %v, want EOF (closed by the host)", i, err)
		}
	}
	if refused != extra {
		t.Fatalf("%d streams past the cap were refused, want %d", refused, extra)
	}
	// The last served stream's goroutine may not have reached the hook yet: the host
	// spawns it and goes on accepting, so wait for the count rather than read it once.
	deadline := time.Now().Add(30 * time.Second)
	for served.Load() < maxGuestStreams && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := served.Load(); n != maxGuestStreams {
		t.Fatalf("%d streams reached the hook, want %d", n, maxGuestStreams)
	}
}
