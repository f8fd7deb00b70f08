package jail

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/jail/control"
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
	eventually.Within(30*time.Second, func() bool { return served.Load() >= maxGuestStreams })
	if n := served.Load(); n != maxGuestStreams {
		t.Fatalf("%d streams reached the hook, want %d", n, maxGuestStreams)
	}
}

// hostileGuest runs acceptGuestStreams with h on one end of a socket pair and gives the
// test the guest's end: open makes a stream of a kind, ended yields what
// acceptGuestStreams returned.
func hostileGuest(t *testing.T, h sessionHooks) (host *yamux.Session, open func(kind string) (net.Conn, error), ended <-chan error) {
	t.Helper()
	hostEnd, guestEnd := socketPair(t)
	host, err := control.Client(hostEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { host.Close() })
	g, err := control.Server(guestEnd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.Close() })
	done := make(chan error, 1)
	go func() { done <- acceptGuestStreams(host, h) }()
	return host, func(kind string) (net.Conn, error) { return control.Open(g, kind) }, done
}

// refused waits for the host to close c, as it does a stream it refuses.
func refused(t *testing.T, c net.Conn) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read err %v, want EOF (refused)", err)
	}
}

// A stream the host closed that the guest keeps open still takes what the guest sends
// into its receive window, and nothing reads it. A guest that holds many such streams
// loses its session.
func TestGuestHoldingClosedStreamsLosesItsSession(t *testing.T) {
	host, open, ended := hostileGuest(t, sessionHooks{Log: slog.New(slog.DiscardHandler)}) // every stream refused

	chunk := make([]byte, 256<<10) // yamux's initial stream window
	const tries = 2000
	var held []net.Conn
	opened := 0
	for ; opened < tries; opened++ {
		c, err := open(control.KindProxy)
		if err != nil {
			break
		}
		held = append(held, c)
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != io.EOF {
			break // the session is gone
		}
		if _, err := c.Write(chunk); err != nil {
			break
		}
	}
	limit := hostStreams + maxGuestStreams + acceptBacklog + maxClosingStreams
	select {
	case err := <-ended:
		if !errors.Is(err, errTooManyStreams) {
			t.Fatalf("accept loop ended with %v, want errTooManyStreams", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the host still serves a guest holding %d streams it closed (%d MiB unread), want the session ended past %d", host.NumStreams(), opened>>2, limit)
	}
	// Each stream holds at most its window, so the count bounds what the host held.
	if opened > limit+300 { // yamux's accept backlog is 256
		t.Errorf("the guest opened %d streams before losing its session, want about %d", opened, limit)
	}
	t.Logf("session ended after the guest opened %d streams", opened)
	runtime.KeepAlive(held)
}

// The guest can trigger a refusal at will, so its warnings are rate limited and what
// they print of the guest's header is one bounded line.
func TestGuestStreamRefusalsAreBoundedWarnings(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  string
		hooks func(log *slog.Logger, release chan struct{}) sessionHooks
		fill  int // streams held open first
	}{
		{"past the stream cap", control.KindProxy, func(log *slog.Logger, release chan struct{}) sessionHooks {
			return sessionHooks{ProxyConn: func(c net.Conn) { <-release; c.Close() }, Log: log}
		}, maxGuestStreams},
		{"unknown share tag", control.KindShare + strings.Repeat("A", 3000), func(log *slog.Logger, _ chan struct{}) sessionHooks {
			shares := newStreamShares(&plan{}, 0, io.Discard, log)
			shares.start()
			return sessionHooks{ShareConn: shares.serve, Log: log}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs nettest.Buffer
			log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
			release := make(chan struct{})
			defer close(release)
			_, open, _ := hostileGuest(t, tc.hooks(log, release))
			var keep []net.Conn
			for range tc.fill {
				c, err := open(control.KindProxy)
				if err != nil {
					t.Fatal(err)
				}
				keep = append(keep, c)
			}
			const extra = 300
			for range extra {
				c, err := open(tc.kind)
				if err != nil {
					t.Fatal(err)
				}
				refused(t, c)
				c.Close()
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			longest := 0
			for _, l := range lines {
				longest = max(longest, len(l))
			}
			if len(lines) > 3 {
				t.Errorf("%d warning lines for %d refused streams, want them rate limited", len(lines), extra)
			}
			if longest > 2*maxGuestText {
				t.Errorf("a refusal logged a %d-byte line, want the guest's text bounded to %d bytes", longest, maxGuestText)
			}
			runtime.KeepAlive(keep)
		})
	}
}

// A guest-init of the guest's own making: it says the command started twice, then holds
// stream after stream the host refuses. The run's Started hook fires once, and the run
// ends with an error that says why the host ended it.
func TestSessionEndsAHostileGuestWithItsReason(t *testing.T) {
	hostEnd, guestEnd := socketPair(t)
	go func() {
		g, err := control.Server(guestEnd)
		if err != nil {
			return
		}
		defer g.Close()
		_, ctlStream, err := control.Accept(g)
		if err != nil {
			return
		}
		ctl := control.NewConn(ctlStream)
		if _, err := ctl.Recv(); err != nil { // the RunSpec
			return
		}
		for range 3 { // stdin, stdout, stderr
			if _, _, err := control.Accept(g); err != nil {
				return
			}
		}
		ctl.Send(control.Message{Type: control.MsgStarted, Pid: 1})
		ctl.Send(control.Message{Type: control.MsgStarted, Pid: 2})
		var held []net.Conn
		for {
			c, err := control.Open(g, "nope")
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	var started atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := runSession(ctx, hostEnd, control.RunSpec{Argv: []string{"true"}}, Stdio{},
		sessionHooks{Started: func(int) { started.Add(1) }, Log: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, ErrSessionLost) || !strings.Contains(err.Error(), errTooManyStreams.Error()) {
		t.Fatalf("run ended with %v, want ErrSessionLost saying %q", err, errTooManyStreams)
	}
	if n := started.Load(); n != 1 {
		t.Errorf("Started hook ran %d times, want once", n)
	}
}

// A busy but honest guest: hundreds of connections held, then a burst of short ones
// that fill the accept backlog and are refused past the cap. It keeps its session.
func TestGuestBurstOfConnectionsKeepsItsSession(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	host, open, ended := hostileGuest(t, sessionHooks{
		ProxyConn: func(c net.Conn) { <-release; c.Close() },
		Log:       slog.New(slog.DiscardHandler),
	})
	var held []net.Conn
	for range 450 {
		c, err := open(control.KindProxy)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	var wg sync.WaitGroup
	for range 300 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := open(control.KindProxy)
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			c.Read(make([]byte, 1))
			c.Close()
		}()
	}
	wg.Wait()
	select {
	case err := <-ended:
		t.Fatalf("the host ended an honest guest's session (%d streams): %v", host.NumStreams(), err)
	case <-time.After(time.Second):
	}
	if host.IsClosed() {
		t.Fatal("session closed")
	}
	runtime.KeepAlive(held)
}
