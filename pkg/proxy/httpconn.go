package proxy

import (
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
// but moving transfer lives while a silent peer times out after idle. A
// non-zero until caps the deadline, bounding how long a peer may dribble
// out something we must see whole (a ClientHello) before deciding.
type deadlineReader struct {
	c     net.Conn
	idle  func() time.Duration
	until time.Time
}

func (r *deadlineReader) Read(b []byte) (int, error) {
	d := time.Now().Add(r.idle())
	if !r.until.IsZero() && r.until.Before(d) {
		d = r.until
	}
	r.c.SetReadDeadline(d)
	return r.c.Read(b)
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
