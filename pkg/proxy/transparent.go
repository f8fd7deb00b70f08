package proxy

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"
)

// ServeTransparent serves connections that an nftables redirect sent to ln
// (Linux). The original destination port comes from SO_ORIGINAL_DST; the
// host comes from the TLS SNI or the HTTP Host header, and the proxy dials
// that name as it resolves it, never the original address, so a forged name
// cannot reach an arbitrary IP. Plain HTTP connections are then served like
// forward-mode ones, deciding every request on its own.
func (p *Proxy) ServeTransparent(ln net.Listener) error {
	return p.serve(ln, false, p.handleTransparent)
}

func (p *Proxy) handleTransparent(cc *clientConn) {
	dst, err := originalDst(cc)
	if err != nil {
		p.log.Warn("proxy transparent", "src", cc.RemoteAddr(), "err", err)
		return
	}
	if la, ok := cc.LocalAddr().(*net.TCPAddr); ok && la.AddrPort() == dst {
		// Dialed the proxy port itself, not redirected: there is no
		// destination port to honour.
		p.log.Warn("proxy transparent: connection was not redirected", "src", cc.RemoteAddr())
		return
	}
	if !p.admitKnown(cc, false, int(dst.Port())) {
		return
	}
	p.serveTransparentConn(cc, int(dst.Port()))
}

// serveTransparentConn sniffs the first byte to tell TLS from HTTP. The
// port alone would misroute TLS on 80 or HTTP on 8443.
func (p *Proxy) serveTransparentConn(cc *clientConn, port int) {
	s := p.newHTTPSession(cc, nil, port)
	defer s.release()
	first, err := s.br.Peek(1)
	if err != nil {
		return
	}
	if first[0] == recordHandshake {
		p.serveTLS(s, port)
		return
	}
	s.serve()
}

// serveTLS decides a TLS connection by its SNI and splices it, replaying the
// ClientHello bytes it consumed. Refusals close the connection: there is no
// way to show a message inside someone else's TLS session.
func (p *Proxy) serveTLS(s *httpSession, port int) {
	cfg := p.cfg.Load()
	d := Decision{Time: time.Now(), Src: s.srcStr, Method: "TLS", Port: port}
	client, known := p.clientFor(nil, s.src)
	if known {
		d.ClientID = client.ID
	}
	deny := func(reason string) {
		d.Reason, d.Allowed = reason, allowedByPolicy(reason) && reason != ""
		d.Duration = time.Since(d.Time)
		p.record(cfg, d)
	}
	// Real clients send the ClientHello at once; only a stalling or hostile
	// peer needs the bound, in time and in bytes.
	s.dr.bound(time.Now().Add(min(cfg.headerTime, cfg.idleTimeout)), maxHelloRaw)
	raw, sni, err := readClientHello(s.br)
	s.dr.unbound()
	if err != nil {
		if errors.Is(err, ErrNoServerName) {
			deny(ReasonNoServerName)
		} else if len(raw) > 0 {
			deny(ReasonBadRequest)
		}
		return
	}
	d.Host = sni
	if !known {
		deny(ReasonUnknownClient)
		return
	}
	if name := client.Secrets.Find(sni); name != "" {
		d.Secret = name
		deny(ReasonSecretExfiltration)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.dialTimeout)
	defer cancel()
	v := p.authorize(ctx, cfg, client, sni, port)
	if v.reason != "" {
		v.note(&d)
		deny(v.reason)
		return
	}
	if client.Secrets.Bound(v.host) {
		pre := append(raw, bufferedBytes(s.br.Buffered(), s.br.Peek)...)
		s.release()
		d.Host = v.host
		p.intercept(cfg, s.conn, d, client, v, pre)
		return
	}
	up, ip, err := p.dial(ctx, cfg, v.addrs, port)
	if err != nil {
		deny(upstreamReason(err))
		return
	}
	d.IP, d.Allowed = ip.String(), true
	n, err := up.Write(raw)
	d.BytesOut += int64(n)
	if err == nil {
		var k int64
		k, err = s.handOver(up)
		d.BytesOut += k
	}
	if err != nil {
		up.Close()
		deny(upstreamReason(err))
		return
	}
	s.conn.SetDeadline(time.Time{})
	out, in, _ := p.relay(s.conn, up, cfg.idleTimeout)
	d.BytesOut += out
	d.BytesIn += in
	d.Duration = time.Since(d.Time)
	p.record(cfg, d)
}

// ServeTransparentConn serves one already-redirected connection whose
// original destination port the caller supplies (for callers that learn it
// some other way than SO_ORIGINAL_DST, and for tests). It blocks until c is done.
func (p *Proxy) ServeTransparentConn(c net.Conn, dst netip.AddrPort) {
	cc, ok := p.track(c)
	if !ok {
		c.Close()
		return
	}
	defer p.untrack(cc)
	if !p.admitKnown(cc, false, int(dst.Port())) {
		return
	}
	p.serveTransparentConn(cc, int(dst.Port()))
}
