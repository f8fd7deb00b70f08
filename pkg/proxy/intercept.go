package proxy

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// intercept terminates the client's TLS for host, a host bound to one of the
// client's secrets, with a leaf from the run's CA, and serves the requests
// inside it as a reverse proxy to host itself (HTTP/1.1 or HTTP/2 on either
// side). Every request has the placeholders bound to host swapped for their
// values, and every response has the values swapped back. The upstream is
// dialed at the addresses already decided for host and its certificate is
// verified for host, so no name the client sends can redirect the values.
// pre holds client bytes already read (a ClientHello). It owns cc until done.
func (p *Proxy) intercept(cfg *config, cc *clientConn, base Decision, client Client, v verdict, pre []byte) {
	srvCfg, err := client.Secrets.CA().ServerConfig(v.host)
	if err != nil {
		p.log.Warn("proxy intercept", "host", v.host, "err", err)
		return
	}
	p.active.Add(1)
	p.metrics.active.Inc()
	defer func() {
		p.active.Add(-1)
		p.metrics.active.Dec()
	}()
	// Past the client's bound the connection is still served, with a 503 to
	// every request, so the guest learns why.
	busy := !p.intercepts.take(cc.src, clientIntercepts)
	if !busy {
		defer p.intercepts.give(cc.src)
	}
	cc.SetDeadline(time.Time{})
	cork := &corkConn{Conn: &prefixConn{Conn: cc, pre: pre}}
	tc := tls.Server(cork, srvCfg)
	tr := &protoTransport{h1: p.upstreamTransport(cfg, v, false), h2: p.upstreamTransport(cfg, v, true)}
	defer tr.h1.CloseIdleConnections()
	defer tr.h2.CloseIdleConnections()
	// net/http's own complaints (handshake failures, aborted bodies) are
	// routine for a proxy; they go to the debug level.
	errLog := slog.NewLogLogger(p.log.Handler(), slog.LevelDebug)
	h := &interceptHandler{p: p, cfg: cfg, base: base, set: client.Secrets, host: v.host, port: v.port, cork: cork, src: cc.src, busy: busy}
	h.rp = &httputil.ReverseProxy{
		Rewrite:        h.rewrite,
		Transport:      tr,
		FlushInterval:  interceptFlush,
		ModifyResponse: h.modifyResponse,
		ErrorHandler:   h.upstreamFailed,
		ErrorLog:       errLog,
	}
	ln := &oneConnListener{c: tc, done: make(chan struct{})}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: cfg.headerTime,
		IdleTimeout:       cfg.idleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: interceptStreams},
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateClosed || st == http.StateHijacked {
				ln.Close()
			}
		},
		ErrorLog: errLog,
	}
	srv.Serve(ln)
	<-ln.done
}

// interceptFlush bounds how long scrubbed bytes of a response of known
// length may wait in the proxy's buffer before they are sent.
const interceptFlush = 5 * time.Millisecond

// upstreamTransport dials only the addresses decided for v and verifies the
// upstream's certificate for v.host.
func (p *Proxy) upstreamTransport(cfg *config, v verdict, h2 bool) *http.Transport {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			c, _, err := p.dial(ctx, cfg, v.addrs, v.port)
			return c, err
		},
		TLSClientConfig:        &tls.Config{ServerName: v.host, RootCAs: cfg.upstreamRoots, MinVersion: tls.VersionTLS12},
		ForceAttemptHTTP2:      h2,
		DisableCompression:     true,
		ResponseHeaderTimeout:  cfg.idleTimeout,
		MaxResponseHeaderBytes: maxResponseHeaderBytes,
		IdleConnTimeout:        cfg.idleTimeout,
		TLSHandshakeTimeout:    cfg.dialTimeout,
	}
	if h2 {
		tr.HTTP2 = &http.HTTP2Config{MaxReceiveBufferPerStream: upstreamStreamWindow, MaxReceiveBufferPerConnection: upstreamConnWindow}
	} else {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return tr
}

// protoTransport speaks to the upstream in the HTTP version the client
// used: Go's HTTP/2 client moves bulk data at half the speed of HTTP/1.1,
// so a client that did not ask for HTTP/2 does not pay for it.
type protoTransport struct{ h1, h2 *http.Transport }

// RoundTrip sends r under a context of its own: the reverse proxy hooks
// into the request's context to relay 1xx answers (103 Early Hints) to the
// client as they are, unscrubbed; without the hook they are skipped.
func (t *protoTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	tr := t.h1
	if r.ProtoMajor == 2 {
		tr = t.h2
	}
	ctx := context.WithValue(context.Background(), pairsKey{}, r.Context().Value(pairsKey{}))
	ctx, cancel := context.WithCancel(context.WithValue(ctx, writerKey{}, r.Context().Value(writerKey{})))
	stop := context.AfterFunc(r.Context(), cancel)
	end := func() { stop(); cancel() }
	resp, err := tr.RoundTrip(r.WithContext(ctx))
	if err != nil {
		end()
		return nil, err
	}
	resp.Body = &endBody{ReadCloser: resp.Body, end: end}
	return resp, nil
}

// endBody releases the request's context once the body is closed.
type endBody struct {
	io.ReadCloser
	end func()
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.end()
	return err
}

// interceptHandler serves the requests of one intercepted connection.
type interceptHandler struct {
	p    *Proxy
	cfg  *config
	base Decision
	set  *inject.Set
	host string
	port int
	rp   *httputil.ReverseProxy
	cork *corkConn  // under the client's TLS
	src  netip.Addr // the client, whose buffer budget its responses share
	busy bool       // the client holds clientIntercepts connections already
}

type pairsKey struct{}

func (h *interceptHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d := h.base
	d.Time, d.Method, d.Allowed = time.Now(), r.Method, true
	refuse := func(reason, detail string) {
		d.Allowed = false
		d.Reason = reason
		d.Duration = time.Since(d.Time)
		h.p.record(h.cfg, d)
		body := denyText(h.host, h.port, reason, detail)
		w.Header().Set(ErrorHeader, reason)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Connection", "close")
		w.WriteHeader(statusFor(reason))
		io.WriteString(w, body)
	}
	if h.busy {
		refuse(ReasonTooManyConns, fmt.Sprintf("this sandbox already holds %d connections to hosts with injected secrets; close some and retry", clientIntercepts))
		return
	}
	if hh, _, err := parseAuthority(r.Host, h.port); err != nil || !strings.EqualFold(strings.TrimSuffix(hh, "."), h.host) {
		refuse(ReasonBadRequest, fmt.Sprintf("the request names host %q inside a connection to %s", r.Host, h.host))
		return
	}
	if r.Header.Get("Upgrade") != "" || r.Method == http.MethodConnect {
		refuse(ReasonBadRequest, "protocol upgrades and CONNECT are not served on a host with injected secrets")
		return
	}
	pairs, err := h.set.Rewrite(h.host, r)
	var ee *inject.ExfilError
	if errors.As(err, &ee) {
		d.Secret = ee.Name
		refuse(ReasonSecretExfiltration, ee.Error())
		return
	}
	// Compressed bodies could not be scrubbed of a reflected value.
	r.Header.Set("Accept-Encoding", "identity")
	cw := &countingResponse{ResponseWriter: w, budget: &h.p.bufs, src: h.src}
	if r.ProtoMajor == 1 {
		// HTTP/1 writes the response from this goroutine, so a batch is
		// whole when a write returns; HTTP/2 writes frames from its own.
		cw.cork = h.cork
	}
	ctx := context.WithValue(context.WithValue(r.Context(), pairsKey{}, pairs), writerKey{}, cw)
	h.rp.ServeHTTP(cw, r.WithContext(ctx))
	cw.drain()
	cw.settle()
	d.BytesIn = cw.n
	if cw.failed {
		d.Reason = ReasonUpstreamError
	}
	d.Duration = time.Since(d.Time)
	h.p.record(h.cfg, d)
}

func (h *interceptHandler) rewrite(pr *httputil.ProxyRequest) {
	pr.Out.URL.Scheme = "https"
	pr.Out.URL.Host = net.JoinHostPort(h.host, strconv.Itoa(h.port))
	pr.Out.Host = pr.In.Host
}

// modifyResponse scrubs the values out of the header names and values, the
// trailers and, streaming, the body. The body's length may change, so it is
// re-framed. Informational answers never get here: protoTransport does not
// pass them on, and the status line's text is not relayed.
func (h *interceptHandler) modifyResponse(resp *http.Response) error {
	pairs, _ := resp.Request.Context().Value(pairsKey{}).([]inject.Pair)
	resp.Header.Del(ErrorHeader)
	inject.ScrubHeader(resp.Header, pairs)
	inject.ScrubHeader(resp.Trailer, pairs)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		return errors.New("upstream switched protocols although no upgrade was requested")
	}
	if resp.Request.Method != http.MethodHead {
		// The header goes, so the client gets the body chunked; the field
		// stays, so the reverse proxy flushes a body of known length on
		// its interval instead of after every write. Bodies of unknown
		// length and event streams are still flushed as they arrive.
		resp.Header.Del("Content-Length")
		if cw, ok := resp.Request.Context().Value(writerKey{}).(*countingResponse); ok && resp.ContentLength >= 0 && !eventStream(resp) {
			cw.batch = true
		}
	}
	resp.Body = &scrubbedBody{Scrubber: inject.NewScrubber(resp.Body, pairs), resp: resp, pairs: pairs}
	return nil
}

// scrubbedBody scrubs the trailers as well: the transport fills them in,
// announced or not, when the body ends, and the reverse proxy sends them
// on after closing the body.
type scrubbedBody struct {
	*inject.Scrubber
	resp  *http.Response
	pairs []inject.Pair
}

func (b *scrubbedBody) Close() error {
	err := b.Scrubber.Close()
	inject.ScrubHeader(b.resp.Trailer, b.pairs)
	return err
}

func (h *interceptHandler) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	if cw, ok := w.(*countingResponse); ok {
		cw.failed = true
	}
	// The error may quote the rewritten URL, which holds the value.
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	reason := upstreamReason(err)
	pairs, _ := r.Context().Value(pairsKey{}).([]inject.Pair)
	msg := denyText(h.host, h.port, reason, err.Error())
	for _, p := range pairs {
		msg = strings.ReplaceAll(msg, p.Sent, p.Guest)
	}
	w.Header().Set(ErrorHeader, reason)
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(statusFor(reason))
	io.WriteString(w, msg)
}

// prefixConn reads pre before the connection's own bytes.
type prefixConn struct {
	net.Conn
	pre []byte
}

func (c *prefixConn) Read(b []byte) (int, error) {
	if len(c.pre) > 0 {
		n := copy(b, c.pre)
		c.pre = c.pre[n:]
		return n, nil
	}
	return c.Conn.Read(b)
}

// oneConnListener hands one connection to an http.Server, then blocks until
// closed.
type oneConnListener struct {
	mu   sync.Mutex
	c    net.Conn
	done chan struct{}
	once sync.Once
}

func (l *oneConnListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	c := l.c
	l.c = nil
	l.mu.Unlock()
	if c != nil {
		return c, nil
	}
	<-l.done
	return nil, net.ErrClosed
}

func (l *oneConnListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *oneConnListener) Addr() net.Addr { return dummyAddr{} }

type dummyAddr struct{}

func (dummyAddr) Network() string { return "tcp" }
func (dummyAddr) String() string  { return "intercept" }

// bufferedBytes copies what a reader already holds past the request.
func bufferedBytes(n int, peek func(int) ([]byte, error)) []byte {
	if n == 0 {
		return nil
	}
	b, _ := peek(n)
	return bytes.Clone(b)
}
