package proxy

import (
	"io"
	"net"
	"time"
)

// ReasonTooManyConns is the refusal reason when a client already holds
// MaxClientConns connections.
const ReasonTooManyConns = "too-many-connections"

// lingerBytes and lingerTime bound how much of a refused client's unread
// input is discarded after the refusal is written. Closing a socket with
// unread input sends a reset that can destroy the refusal in flight, so the
// proxy half-closes and drains a little first, never keeping any of it.
const (
	lingerBytes = 256 << 10
	lingerTime  = time.Second
)

// trackClient tracks an accepted connection and counts it against its
// source address; false means the address is at MaxClientConns (or the
// proxy is shutting down) and the connection must be refused.
func (p *Proxy) trackClient(c net.Conn) (*clientConn, bool) {
	src := remoteAddr(c)
	limit := p.cfg.Load().maxConns
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shutdown || src.IsValid() && !p.open.take(src, limit) {
		return nil, false
	}
	cc := &clientConn{Conn: c, src: src, counted: src.IsValid()}
	p.conns[cc] = struct{}{}
	p.wg.Add(1)
	return cc, true
}

// refuseBusy closes a connection trackClient turned away, after a short
// HTTP refusal when the listener speaks HTTP to its clients. It runs on the
// accept loop, so it only writes what fits a fresh socket's send buffer.
func (p *Proxy) refuseBusy(c net.Conn, answer bool) {
	defer c.Close()
	p.mu.Lock()
	down := p.shutdown
	p.mu.Unlock()
	if down {
		return
	}
	limit := p.cfg.Load().maxConns
	p.warn.Warn("proxy connection refused", "src", c.RemoteAddr(), "why", "too many open connections", "max", limit)
	p.metrics.decisions.WithLabelValues(ReasonTooManyConns).Inc()
	if answer {
		c.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(c, refusalStatus(0, "", 0, ReasonTooManyConns,
			"this sandbox already holds the most open proxy connections allowed; close some and retry"))
	}
}

// admitKnown drops a connection from an address that is no registered
// client before a byte of it is read or parsed, recording the refusal; it
// reports whether the connection may go on. With answer, the client first
// gets a 403 saying why.
func (p *Proxy) admitKnown(cc *clientConn, answer bool, port int) bool {
	if _, ok := p.reg.Lookup(cc.src); ok {
		return true
	}
	cfg := p.cfg.Load()
	d := Decision{Time: time.Now(), Port: port, Reason: ReasonUnknownClient}
	if a := cc.RemoteAddr(); a != nil {
		d.Src = a.String()
	}
	p.record(cfg, d)
	if answer {
		cc.SetWriteDeadline(time.Now().Add(time.Second))
		io.WriteString(cc, refusal("", 0, ReasonUnknownClient, ""))
		lingerClose(cc)
	}
	return false
}

// lingerClose half-closes c and discards a bounded amount of its input for
// a bounded time, so the answer already written reaches a client that is
// still sending.
func lingerClose(c net.Conn) {
	if cw, ok := unwrap(c).(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
	c.SetReadDeadline(time.Now().Add(lingerTime))
	io.CopyN(io.Discard, c, lingerBytes)
	c.Close()
}
