package proxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

var errIdle = errors.New("tunnel idle timeout")

// unwrap returns the connection underneath our tracking wrapper so io.Copy
// sees two *net.TCPConn and can use splice(2).
func unwrap(c net.Conn) net.Conn {
	if cc, ok := c.(*clientConn); ok {
		return cc.Conn
	}
	return c
}

// activity is the last time either direction moved bytes.
type activity struct{ last atomic.Int64 }

func (a *activity) touch()               { a.last.Store(time.Now().UnixNano()) }
func (a *activity) since() time.Duration { return time.Since(time.Unix(0, a.last.Load())) }
func newActivity() *activity             { a := &activity{}; a.touch(); return a }

// relay copies client->up and up->client until both directions have ended,
// either side fails, or neither moved a byte for idle. An EOF in one
// direction is passed on as a half-close so request/response protocols that
// shut down their write side still get their answer. It returns the bytes
// sent to up (out) and to the client (in).
func (p *Proxy) relay(client, up net.Conn, idle time.Duration) (out, in int64, err error) {
	client, up = unwrap(client), unwrap(up)
	p.active.Add(1)
	p.metrics.active.Inc()
	defer func() {
		p.active.Add(-1)
		p.metrics.active.Dec()
	}()
	act := newActivity()
	var wg sync.WaitGroup
	var errOut, errIn error
	wg.Add(2)
	go func() {
		defer wg.Done()
		out, errOut = copyHalf(up, client, idle, act)
		if errOut != nil {
			client.Close()
			up.Close()
		}
	}()
	go func() {
		defer wg.Done()
		in, errIn = copyHalf(client, up, idle, act)
		if errIn != nil {
			client.Close()
			up.Close()
		}
	}()
	wg.Wait()
	client.Close()
	up.Close()
	return out, in, errors.Join(errOut, errIn)
}

// copyHalf copies src to dst in rounds bounded by a read deadline, so a
// spliced copy still notices idleness: a round that ends in a timeout
// continues while either direction moved bytes within idle. Only read
// deadlines are used because a write deadline could strand spliced bytes.
func copyHalf(dst, src net.Conn, idle time.Duration, act *activity) (int64, error) {
	round := idle / 4
	if round < 10*time.Millisecond {
		round = 10 * time.Millisecond
	}
	var total int64
	for {
		src.SetReadDeadline(time.Now().Add(round))
		n, err := io.Copy(dst, src)
		total += n
		if n > 0 {
			act.touch()
		}
		if err == nil {
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
