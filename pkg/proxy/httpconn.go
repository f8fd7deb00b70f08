package proxy

import (
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/textproto"
	"strings"
	"time"
)

// hopHeaders are meaningful only between one client and one proxy; they are
// never passed on. Every Proxy-* header is stripped as well.
var hopHeaders = []string{
	"Connection", "Keep-Alive", "Proxy-Connection", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// removeHopByHop deletes hop-by-hop headers, the headers named in
// Connection, and all Proxy-* headers.
func removeHopByHop(h http.Header) {
	for _, v := range h["Connection"] {
		for _, f := range strings.Split(v, ",") {
			if f = textproto.TrimString(f); f != "" {
				h.Del(f)
			}
		}
	}
	for _, k := range hopHeaders {
		h.Del(k)
	}
	for k := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "Proxy-") {
			delete(h, k)
		}
	}
}

// deadlineReader refreshes the read deadline before every read, so a slow
// but moving transfer lives while a silent peer times out after idle. While
// bound, a fixed deadline and a byte budget cap both: something we must see
// whole before deciding (request headers, a ClientHello) can be neither
// dribbled out forever nor grown without end.
type deadlineReader struct {
	c       net.Conn
	idle    func() time.Duration
	until   time.Time
	bounded bool  // left applies
	left    int64 // bytes the current bound still allows
	hit     bool  // a read was refused because left ran out
}

// errReadLimit is what a bound deadlineReader returns once its budget is spent.
var errReadLimit = errors.New("read limit reached")

// bound caps, until unbound, the deadline at until (zero: no cap) and the
// bytes read at n.
func (r *deadlineReader) bound(until time.Time, n int64) {
	r.until, r.bounded, r.left, r.hit = until, true, n, false
}

func (r *deadlineReader) unbound() { r.until, r.bounded = time.Time{}, false }

func (r *deadlineReader) Read(b []byte) (int, error) {
	if r.bounded {
		if r.left <= 0 {
			r.hit = true
			return 0, errReadLimit
		}
		if int64(len(b)) > r.left {
			b = b[:r.left]
		}
	}
	d := time.Now().Add(r.idle())
	if !r.until.IsZero() && r.until.Before(d) {
		d = r.until
	}
	r.c.SetReadDeadline(d)
	n, err := r.c.Read(b)
	if r.bounded {
		r.left -= int64(n)
	}
	return n, err
}

// countWriter counts bytes written through it and, when c is set, gives
// every write idle time to complete so a peer that stops reading cannot pin
// the connection forever.
type countWriter struct {
	w    io.Writer
	n    int64
	c    net.Conn
	idle time.Duration
}

func (c *countWriter) Write(b []byte) (int, error) {
	if c.c != nil {
		c.c.SetWriteDeadline(time.Now().Add(c.idle))
	}
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// remoteAddr returns the source address of c, if it is an IP socket.
func remoteAddr(c net.Conn) netip.Addr {
	switch a := c.RemoteAddr().(type) {
	case *net.TCPAddr:
		return a.AddrPort().Addr().Unmap()
	case nil:
		return netip.Addr{}
	default:
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap()
		}
	}
	return netip.Addr{}
}

// clientFor returns the client a request is decided for. A caller-fixed
// client is refreshed from the registry by ID so runtime allowlist edits
// reach connections served through ServeForwardConn too.
func (p *Proxy) clientFor(fixed *Client, src netip.Addr) (Client, bool) {
	if fixed != nil {
		if fixed.ID != "" {
			if c, ok := p.reg.LookupID(fixed.ID); ok {
				return c, true
			}
		}
		return *fixed, true
	}
	return p.reg.Lookup(src)
}
