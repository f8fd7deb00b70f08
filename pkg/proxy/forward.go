package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// ServeForward serves forward-proxy clients (absolute-form HTTP requests and
// CONNECT) accepted from ln. Each request is decided for the registry client
// at the connection's source address, looked up again per request. It
// returns nil after Shutdown or when ln is closed.
func (p *Proxy) ServeForward(ln net.Listener) error {
	return p.serve(ln, true, func(cc *clientConn) {
		if !p.admitKnown(cc, true, 0) {
			return
		}
		s := p.newHTTPSession(cc, nil, 0)
		defer s.release()
		s.serve()
	})
}

// ServeForwardConn serves one forward-mode connection whose client identity
// the caller fixes (connections that arrive over a VM control channel have
// no meaningful source address). If a client with the same ID is in the
// registry its current allowlist is used. It blocks until c is finished and
// closes it.
func (p *Proxy) ServeForwardConn(c net.Conn, client Client) {
	cc, ok := p.track(c)
	if !ok {
		c.Close()
		return
	}
	defer p.untrack(cc)
	s := p.newHTTPSession(cc, &client, 0)
	defer s.release()
	s.serve()
}

// httpSession is one client connection carrying HTTP/1.x requests, in
// forward mode or (tport != 0) transparent mode where the Host header names
// the target and tport is the original destination port.
type httpSession struct {
	p      *Proxy
	conn   *clientConn
	br     *bufio.Reader
	dr     *deadlineReader
	fixed  *Client
	src    netip.Addr
	srcStr string
	tport  int
}

func (p *Proxy) newHTTPSession(cc *clientConn, fixed *Client, tport int) *httpSession {
	s := &httpSession{p: p, conn: cc, fixed: fixed, tport: tport, src: remoteAddr(cc)}
	if a := cc.RemoteAddr(); a != nil {
		s.srcStr = a.String()
	}
	if fixed != nil && fixed.IP.IsValid() {
		s.src = fixed.IP
	}
	s.dr = &deadlineReader{c: cc, idle: p.idleTimeout}
	s.br = readerPool.Get().(*bufio.Reader)
	s.br.Reset(s.dr)
	return s
}

// readerPool recycles the request readers: a session holds one only while
// it reads requests, not while it relays a tunnel.
var readerPool = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 4<<10) }}

// release returns the session's reader to the pool; the session reads no
// more requests after it.
func (s *httpSession) release() {
	if s.br == nil {
		return
	}
	s.br.Reset(nil)
	readerPool.Put(s.br)
	s.br = nil
}

// handOver writes the bytes the client sent behind its request (a TLS
// ClientHello pipelined after CONNECT) to up and releases the reader, so an
// open tunnel does not keep it.
func (s *httpSession) handOver(up net.Conn) (int64, error) {
	var n int
	var err error
	if k := s.br.Buffered(); k > 0 {
		b, _ := s.br.Peek(k)
		n, err = up.Write(b)
	}
	s.release()
	return int64(n), err
}

func (p *Proxy) idleTimeout() time.Duration { return p.cfg.Load().idleTimeout }

// serve reads requests until the client or a refusal ends the connection.
// Every request is decided on its own, so a kept-alive connection cannot
// carry a request to a host the first request did not name.
func (s *httpSession) serve() {
	for {
		if !s.p.setIdle(s.conn, true) {
			return
		}
		req, started, err := s.readRequest()
		if !s.p.setIdle(s.conn, false) {
			return
		}
		if err != nil {
			s.readFailed(started, err)
			return
		}
		if !s.handle(req) {
			return
		}
	}
}

// readRequest waits up to the idle timeout for the next request to begin,
// then reads its request line and headers within HeaderTimeout and
// MaxHeaderBytes in total. started reports whether any byte of it arrived.
func (s *httpSession) readRequest() (req *http.Request, started bool, err error) {
	cfg := s.p.cfg.Load()
	s.dr.bound(time.Time{}, MaxHeaderBytes)
	defer s.dr.unbound()
	if _, err := s.br.Peek(1); err != nil {
		return nil, false, err
	}
	s.dr.until = time.Now().Add(cfg.headerTime)
	req, err = http.ReadRequest(s.br)
	if err != nil && s.dr.hit {
		err = errHeaderTooLarge
	}
	return req, true, err
}

var errHeaderTooLarge = fmt.Errorf("request line and headers exceed %d KiB", MaxHeaderBytes>>10)

// readFailed answers a request that could not be read: too large (431), too
// slow (408) or malformed (400), all with the bad-request reason. A client
// that went away, or never started a request, is let go without a word.
func (s *httpSession) readFailed(started bool, err error) {
	cfg := s.p.cfg.Load()
	status := 0
	switch {
	case errors.Is(err, errHeaderTooLarge):
		status = http.StatusRequestHeaderFieldsTooLarge
	case !started || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || errors.Is(err, io.ErrUnexpectedEOF):
		return
	case isTimeout(err):
		status = http.StatusRequestTimeout
		err = fmt.Errorf("request line and headers not complete within %s", cfg.headerTime)
	}
	d := s.decision(nil)
	d.Reason = ReasonBadRequest
	d.Duration = time.Since(d.Time)
	s.p.record(cfg, d)
	s.conn.SetWriteDeadline(time.Now().Add(time.Second))
	io.WriteString(s.conn, refusalStatus(status, "", 0, ReasonBadRequest, err.Error()))
	lingerClose(s.conn)
}

func (s *httpSession) decision(req *http.Request) Decision {
	d := Decision{Time: time.Now(), Src: s.srcStr}
	if c, ok := s.p.clientFor(s.fixed, s.src); ok {
		d.ClientID = c.ID
	}
	if req != nil {
		d.Method = req.Method
	}
	return d
}

// refuse answers with a refusal, records the decision and reports false so
// the caller closes the connection (the request body is not drained).
func (s *httpSession) refuse(cfg *config, d Decision, reason, detail string) bool {
	d.Reason = reason
	d.Allowed = allowedByPolicy(reason) && reason != ""
	msg := refusal(d.Host, d.Port, reason, detail)
	d.BytesIn += int64(len(msg))
	d.Duration = time.Since(d.Time)
	// Record first so observers see decisions in the order clients see answers.
	s.p.record(cfg, d)
	io.WriteString(s.conn, msg)
	return false
}

// target extracts host and port from a request according to the mode.
func (s *httpSession) target(req *http.Request) (string, int, error) {
	switch {
	case s.tport != 0:
		if req.Method == http.MethodConnect {
			return "", 0, errors.New("CONNECT is not accepted on a transparent connection")
		}
		if req.Host == "" {
			return "", 0, errNoHost
		}
		h, _, err := parseAuthority(req.Host, s.tport)
		return h, s.tport, err
	case req.Method == http.MethodConnect:
		return parseAuthority(req.RequestURI, 0)
	case req.URL == nil || !req.URL.IsAbs() || req.URL.Host == "":
		return "", 0, errors.New("origin-form request sent to a proxy; use absolute-form (GET http://host/path)")
	case !strings.EqualFold(req.URL.Scheme, "http"):
		return "", 0, fmt.Errorf("scheme %q in absolute-form; use CONNECT for https", req.URL.Scheme)
	}
	return parseAuthority(req.URL.Host, 80)
}

var errNoHost = errors.New("request has no Host header")

// handle decides and serves one request; false ends the connection.
func (s *httpSession) handle(req *http.Request) bool {
	cfg := s.p.cfg.Load()
	// A previous response may have left a write deadline behind.
	s.conn.SetWriteDeadline(time.Time{})
	d := s.decision(req)
	client, known := s.p.clientFor(s.fixed, s.src)
	host, port, err := s.target(req)
	if err != nil {
		if errors.Is(err, errNoHost) {
			return s.refuse(cfg, d, ReasonNoServerName, err.Error())
		}
		return s.refuse(cfg, d, ReasonBadRequest, err.Error())
	}
	d.Host, d.Port = host, port
	if !known {
		return s.refuse(cfg, d, ReasonUnknownClient, "")
	}
	// A placeholder never travels in clear text nor in a CONNECT target.
	if name := client.Secrets.FindRequest(req); name != "" {
		d.Secret = name
		return s.refuse(cfg, d, ReasonSecretExfiltration,
			fmt.Sprintf("the placeholder of secret %s may only be sent over HTTPS to the hosts it is bound to", name))
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.dialTimeout)
	defer cancel()
	v := s.p.authorize(ctx, cfg, client, host, port)
	d.Host = v.host
	if v.reason != "" {
		v.note(&d)
		return s.refuse(cfg, d, v.reason, v.detail)
	}
	if req.Method == http.MethodConnect && client.Secrets.Bound(v.host) {
		return s.interceptConnect(cfg, d, client, v)
	}
	up, ip, err := s.p.dial(ctx, cfg, v.addrs, port)
	if err != nil {
		return s.refuse(cfg, d, upstreamReason(err), err.Error())
	}
	d.IP = ip.String()
	if req.Method == http.MethodConnect {
		return s.tunnel(cfg, d, up)
	}
	return s.forward(cfg, d, req, up)
}

// interceptConnect answers a CONNECT to a host bound to a secret and serves
// the TLS inside it itself.
func (s *httpSession) interceptConnect(cfg *config, d Decision, client Client, v verdict) bool {
	if _, err := io.WriteString(s.conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return false
	}
	pre := bufferedBytes(s.br.Buffered(), s.br.Peek)
	s.release()
	s.p.intercept(cfg, s.conn, d, client, v, pre)
	return false
}

// tunnel answers a CONNECT and splices until either side is done.
func (s *httpSession) tunnel(cfg *config, d Decision, up net.Conn) bool {
	d.Allowed = true
	n, err := io.WriteString(s.conn, "HTTP/1.1 200 Connection established\r\n\r\n")
	d.BytesIn += int64(n)
	if err != nil {
		up.Close()
		d.Reason = ReasonUpstreamError
		d.Duration = time.Since(d.Time)
		s.p.record(cfg, d)
		return false
	}
	// A client may pipeline its first bytes (a TLS ClientHello) right
	// behind the CONNECT; they sit in our buffer, not in the socket.
	w, err := s.handOver(up)
	d.BytesOut += w
	if err != nil {
		up.Close()
		d.Reason = upstreamReason(err)
		d.Duration = time.Since(d.Time)
		s.p.record(cfg, d)
		return false
	}
	s.conn.SetDeadline(time.Time{})
	out, in, _ := s.p.relay(s.conn, up, cfg.idleTimeout)
	d.BytesOut += out
	d.BytesIn += in
	d.Duration = time.Since(d.Time)
	s.p.record(cfg, d)
	return false
}
