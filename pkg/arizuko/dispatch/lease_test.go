package dispatch

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/internal/nettest"
)

// frozenRelay forwards TCP to upstream until freeze is closed, then holds
// every connection open and silent, as a cut link does: nothing fails, nothing answers.
func frozenRelay(t *testing.T, upstream string) (addr string, freeze chan struct{}) {
	freeze = make(chan struct{})
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			select {
			case <-freeze:
				<-t.Context().Done()
				return
			default:
			}
			if err != nil {
				dst.Close()
				return
			}
			dst.Write(buf[:n])
		}
	}
	addr = nettest.Server(t, func(c net.Conn) {
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			c.Close()
			return
		}
		t.Cleanup(func() { c.Close(); up.Close() })
		go pipe(up, c)
		pipe(c, up)
	})
	return addr, freeze
}

// relayedHolder holds folder f's lease with a ttl over a link to NATS that
// closing freeze cuts.
func relayedHolder(t *testing.T, ttl time.Duration) (c *natstest.Cluster, h *holder, freeze chan struct{}) {
	t.Helper()
	c = natstest.Start(t, 1)
	addr, freeze := frozenRelay(t, strings.TrimPrefix(c.URL(), "nats://"))
	nc, err := nats.Connect("nats://" + addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Ensure(context.Background(), js, ttl, 1, quiet)
	if err != nil {
		t.Fatal(err)
	}
	h, err = acquire(context.Background(), s.Leases, ttl, "f", Lease{Runner: "r", Turn: 1, Attempt: 1, Dispatch: "d"}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	return c, h, freeze
}

// A holder whose renewals hang (its link to NATS cut) stops the turn by two
// thirds of the TTL, well before the lease can expire and another runner
// take the folder.
func TestLeaseLostBeforeExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	_, h, freeze := relayedHolder(t, ttl)
	ctx := context.Background()
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	start := time.Now()
	done := make(chan struct{})
	go func() { defer close(done); h.keep(tctx, cancel, func() {}) }()
	close(freeze)
	select {
	case <-done:
	case <-time.After(2 * ttl):
		t.Fatal("keep went on renewing with no NATS")
	}
	took := time.Since(start)
	if !errors.Is(context.Cause(tctx), ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(tctx))
	}
	if took > 2*ttl/3+ttl/6 {
		t.Fatalf("lease given up after %s; want by %s, a third of the ttl %s before it expires", took, 2*ttl/3, ttl)
	}
	t.Logf("lease given up %s after the last renewal", took.Round(time.Millisecond))
}

// A holder whose link is cut after renewals have succeeded stops the turn by two
// thirds of the TTL after the last renewal the bucket stored, not at the moment the
// lease expires: a renewal that hangs must not be retried past that point.
func TestLeaseLostBeforeExpiryAfterRenewal(t *testing.T) {
	const ttl = 3 * time.Second
	c, h, freeze := relayedHolder(t, ttl)
	ctx := context.Background()
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	// The second tick comes after the first renewal has returned: cut the link then.
	acquired, ticks := h.rev, 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.keep(tctx, cancel, func() {
			if ticks++; ticks == 2 {
				close(freeze)
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(4 * ttl):
		t.Fatal("keep went on renewing with no NATS")
	}
	ended := time.Now()
	if !errors.Is(context.Cause(tctx), ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(tctx))
	}
	// Read the last stored renewal past the frozen link: the lease expires ttl after it.
	djs, err := jetstream.New(c.Connect())
	if err != nil {
		t.Fatal(err)
	}
	kv, err := djs.KeyValue(ctx, LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, LeaseKey("f"))
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() == acquired {
		t.Fatalf("the link was cut before any renewal was stored (%d ticks)", ticks)
	}
	took := ended.Sub(e.Created())
	if took > 2*ttl/3+ttl/6 {
		t.Fatalf("lease given up %s after its last renewal; want by %s, a third of the ttl %s before it expires", took, 2*ttl/3, ttl)
	}
	t.Logf("lease given up %s after its last renewal", took.Round(time.Millisecond))
}
