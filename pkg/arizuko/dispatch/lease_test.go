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

// storedLease reads folder f's lease past the frozen link, over a fresh
// connection to the cluster: the lease expires ttl after the entry was created.
func storedLease(t *testing.T, c *natstest.Cluster) jetstream.KeyValueEntry {
	t.Helper()
	ctx := context.Background()
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
		t.Fatalf("the lease was gone by the time its holder gave it up: %v", err)
	}
	return e
}

// keepUntilLost runs h.keep with tick called on every renewal tick, and returns
// when keep stopped the turn. It fails the test unless the cause is ErrLeaseLost.
func keepUntilLost(t *testing.T, h *holder, limit time.Duration, tick func(n int)) (ended time.Time) {
	t.Helper()
	tctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	ticks := 0
	done := make(chan time.Time, 1)
	go func() {
		h.keep(tctx, cancel, func() { ticks++; tick(ticks) })
		done <- time.Now()
	}()
	select {
	case ended = <-done:
	case <-time.After(limit):
		t.Fatal("keep went on renewing with no NATS")
	}
	if !errors.Is(context.Cause(tctx), ErrLeaseLost) {
		t.Fatalf("cause %v, want ErrLeaseLost", context.Cause(tctx))
	}
	return ended
}

// stoppedBeforeExpiry fails the test unless the turn was stopped before the lease
// stored in e lapsed, that is before another runner could take the folder: the order
// of the two events is the property, not how fast the holder noticed.
func stoppedBeforeExpiry(t *testing.T, e jetstream.KeyValueEntry, ended time.Time, ttl time.Duration) {
	t.Helper()
	expires := e.Created().Add(ttl)
	if !ended.Before(expires) {
		t.Fatalf("turn stopped at %s, %s after the lease expired at %s: another runner could have taken the folder",
			ended.Format(time.StampMilli), ended.Sub(expires), expires.Format(time.StampMilli))
	}
	t.Logf("turn stopped %s after the last stored renewal, %s before the lease expired",
		ended.Sub(e.Created()).Round(time.Millisecond), expires.Sub(ended).Round(time.Millisecond))
}

// A holder whose renewals hang (its link to NATS cut) stops the turn before the
// lease can expire and another runner take the folder.
func TestLeaseLostBeforeExpiry(t *testing.T) {
	const ttl = 3 * time.Second
	c, h, freeze := relayedHolder(t, ttl)
	close(freeze)
	ended := keepUntilLost(t, h, 2*ttl, func(int) {})
	e := storedLease(t, c)
	if e.Revision() != h.rev {
		t.Fatalf("a renewal was stored (revision %d, acquired %d) over a cut link", e.Revision(), h.rev)
	}
	stoppedBeforeExpiry(t, e, ended, ttl)
}

// A holder whose link is cut after renewals have succeeded stops the turn before
// the last renewal the bucket stored expires, not at the moment the lease expires:
// a renewal that hangs must not be retried past that point.
func TestLeaseLostBeforeExpiryAfterRenewal(t *testing.T) {
	const ttl = 3 * time.Second
	c, h, freeze := relayedHolder(t, ttl)
	// The second tick comes after the first renewal has returned: cut the link then.
	acquired := h.rev
	ended := keepUntilLost(t, h, 4*ttl, func(n int) {
		if n == 2 {
			close(freeze)
		}
	})
	e := storedLease(t, c)
	if e.Revision() == acquired {
		t.Fatal("the link was cut before any renewal was stored")
	}
	stoppedBeforeExpiry(t, e, ended, ttl)
}
