package proxy

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"time"
)

var errIdle = errors.New("tunnel idle timeout")

// unwrap returns the connection underneath our tracking wrapper so the
// relay sees two *net.TCPConn and can work on their descriptors.
func unwrap(c net.Conn) net.Conn {
	if cc, ok := c.(*clientConn); ok {
		return cc.Conn
	}
	return c
}

// activity is the last time either direction moved bytes, and how many
// directions have reached EOF.
type activity struct {
	last  atomic.Int64
	ended atomic.Int32
}

func (a *activity) touch()               { a.last.Store(time.Now().UnixNano()) }
func (a *activity) since() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }
func newActivity() *activity             { a := &activity{}; a.touch(); return a }

// relay copies client->up and up->client until both directions have ended,
// either side fails, or neither moved a byte for idle. An EOF in one
// direction is passed on as a half-close so request/response protocols that
// shut down their write side still get their answer. It returns the bytes
// sent to up (out) and to the client (in). The client->up direction runs on
// the calling goroutine, so a tunnel costs one extra goroutine.
func (p *Proxy) relay(client, up net.Conn, idle time.Duration) (out, in int64, err error) {
	client, up = unwrap(client), unwrap(up)
	p.active.Add(1)
	p.metrics.active.Inc()
	defer func() {
		p.active.Add(-1)
		p.metrics.active.Dec()
	}()
	act := newActivity()
	var errIn error
	done := make(chan struct{})
	go func() {
		defer close(done)
		in, errIn = copyHalf(client, up, idle, act)
		if errIn != nil {
			client.Close()
			up.Close()
		}
	}()
	out, errOut := copyHalf(up, client, idle, act)
	if errOut != nil {
		client.Close()
		up.Close()
	}
	<-done
	client.Close()
	up.Close()
	return out, in, errors.Join(errOut, errIn)
}

// copyHalf copies src to dst, then half-closes dst. It reads in rounds
// bounded by a read deadline so a blocked copy still notices idleness: a
// round that ends in a timeout continues while either direction moved bytes
// within idle. Only read deadlines are used because a write deadline could
// strand bytes already taken from src.
func copyHalf(dst, src net.Conn, idle time.Duration, act *activity) (int64, error) {
	round := max(idle/4, 10*time.Millisecond)
	mover := newMover(dst, src)
	var total int64
	for {
		src.SetReadDeadline(time.Now().Add(round))
		n, err := mover.copy(act)
		total += n
		if err == nil {
			if act.ended.Add(1) == 2 {
				// Both peers have sent their FIN and read queues are
				// empty, so relay's close sends dst the same FIN a
				// shutdown would; skip the extra system call.
				return total, nil
			}
			// EOF from src: tell dst nothing more is coming.
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				if cerr := cw.CloseWrite(); cerr != nil {
					return total, cerr
				}
				return total, nil
			}
			return total, errors.New("peer ended and the other side cannot half-close")
		}
		if isTimeout(err) {
			if act.since() < idle {
				continue
			}
			return total, errIdle
		}
		// Includes net.ErrClosed: Shutdown or the other direction cut the
		// tunnel, and relay must close both ends so nothing lingers.
		return total, err
	}
}

// mover copies one direction until EOF (nil error) or an error, which
// includes the read deadline passing.
type mover interface {
	copy(act *activity) (int64, error)
}

func newMover(dst, src net.Conn) mover {
	if m, ok := newRawMover(dst, src); ok {
		return m
	}
	return &genericMover{dst: dst, src: src}
}

// genericMover serves connections without a descriptor (streams from a VM
// control channel, test pipes) with plain io.Copy.
type genericMover struct{ dst, src net.Conn }

func (m *genericMover) copy(act *activity) (int64, error) {
	n, err := io.Copy(m.dst, &touchReader{r: m.src, act: act})
	return n, err
}

type touchReader struct {
	r   io.Reader
	act *activity
}

func (t *touchReader) Read(b []byte) (int, error) {
	n, err := t.r.Read(b)
	if n > 0 {
		t.act.touch()
	}
	return n, err
}
