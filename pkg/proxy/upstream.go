package proxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"
)

// forward relays one plain-HTTP request to the connected upstream and its
// response back. The upstream connection serves this request only; the
// client connection stays open unless either side asked to close it.
// Redirects are never followed: a 3xx goes to the client like any answer.
func (s *httpSession) forward(cfg *config, d Decision, req *http.Request, up net.Conn) bool {
	defer up.Close()
	d.Allowed = true
	clientClose := req.Close // ReadRequest folds in Connection: close and HTTP/1.0 rules
	expect := strings.EqualFold(strings.TrimSpace(req.Header.Get("Expect")), "100-continue")
	prepareUpstreamRequest(req)

	finish := func(reason string, keep bool) bool {
		d.Reason = reason
		d.Duration = time.Since(d.Time)
		s.p.record(cfg, d)
		return keep
	}
	fail := func(err error) bool {
		return s.refuse(cfg, d, upstreamReason(err), err.Error())
	}

	if expect {
		// We answer the expectation ourselves so the client sends its body
		// now; the upstream sees a plain request.
		n, err := io.WriteString(s.conn, "HTTP/1.1 100 Continue\r\n\r\n")
		d.BytesIn += int64(n)
		if err != nil {
			return finish(ReasonUpstreamError, false)
		}
	}

	var werr error
	d.BytesOut, werr = sendUpstream(cfg, req, up)
	if werr != nil {
		return fail(fmt.Errorf("send request upstream: %w", werr))
	}

	cout := &countWriter{w: s.conn, c: s.conn, idle: cfg.idleTimeout}
	cbw := bufio.NewWriter(cout)
	resp, err := readUpstreamResponse(cfg, req, up, cbw)
	if err != nil {
		cbw.Flush()
		d.BytesIn += cout.n
		if cout.n > 0 {
			return finish(upstreamReason(err), false)
		}
		return fail(fmt.Errorf("read upstream response: %w", err))
	}
	defer resp.Body.Close()

	clientClose = prepareClientResponse(req, resp, clientClose)
	err = resp.Write(cbw)
	if err == nil {
		err = cbw.Flush()
	}
	d.BytesIn += cout.n
	if err != nil {
		return finish(upstreamReason(err), false)
	}
	return finish("", !clientClose)
}

// prepareUpstreamRequest strips what is the client's hop only and makes the request
// the upstream connection's one and only.
func prepareUpstreamRequest(req *http.Request) {
	removeHopByHop(req.Header)
	req.Header.Del("Expect")
	if _, ok := req.Header["User-Agent"]; !ok {
		// Keep Go from inventing a User-Agent the client never sent.
		req.Header["User-Agent"] = []string{""}
	}
	req.RequestURI = ""
	req.Close = true
}

// sendUpstream writes req to up and returns the bytes that went out. On error the
// request body is closed.
func sendUpstream(cfg *config, req *http.Request, up net.Conn) (int64, error) {
	upOut := &countWriter{w: up, c: up, idle: cfg.idleTimeout}
	bw := bufio.NewWriter(upOut)
	err := req.Write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if err != nil && req.Body != nil {
		req.Body.Close()
	}
	return upOut.n, err
}

// readUpstreamResponse reads the upstream's final response head, passing informational
// answers (103 Early Hints) through to cbw as they come. A switch of protocols nobody
// asked for is an error.
func readUpstreamResponse(cfg *config, req *http.Request, up net.Conn, cbw *bufio.Writer) (*http.Response, error) {
	// An upstream's response headers are bounded too, if more generously
	// than a client's: they are held whole before the client sees a byte.
	udr := &deadlineReader{c: up, idle: func() time.Duration { return cfg.idleTimeout }}
	udr.bound(time.Time{}, maxResponseHeaderBytes)
	ubr := bufio.NewReader(udr)
	resp, err := http.ReadResponse(ubr, req)
	for err == nil && resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
		removeHopByHop(resp.Header)
		fmt.Fprintf(cbw, "HTTP/1.1 %s\r\n", resp.Status)
		resp.Header.Write(cbw)
		cbw.WriteString("\r\n")
		resp, err = http.ReadResponse(ubr, req)
	}
	udr.unbound()
	if err != nil && udr.hit {
		err = fmt.Errorf("response headers exceed %d KiB", maxResponseHeaderBytes>>10)
	}
	if err == nil && resp.StatusCode == http.StatusSwitchingProtocols {
		resp.Body.Close()
		err = fmt.Errorf("upstream switched protocols although no upgrade was requested")
	}
	return resp, err
}

// prepareClientResponse makes resp fit for the client as HTTP/1.1 from this proxy and
// returns whether the client connection closes after it.
func prepareClientResponse(req *http.Request, resp *http.Response, clientClose bool) bool {
	removeHopByHop(resp.Header)
	// Only the proxy speaks for itself in this header.
	resp.Header.Del(ErrorHeader)
	resp.ProtoMajor, resp.ProtoMinor, resp.Proto = 1, 1, "HTTP/1.1"
	if resp.ContentLength < 0 && len(resp.TransferEncoding) == 0 && bodyAllowed(resp.StatusCode) && req.Method != http.MethodHead {
		// Close-delimited upstream body: re-frame it as chunked so the
		// client connection can stay alive; HTTP/1.0 clients cannot read
		// chunks, so they get the body up to the close instead.
		if req.ProtoAtLeast(1, 1) {
			resp.TransferEncoding = []string{"chunked"}
		} else {
			clientClose = true
		}
	}
	resp.Close = clientClose
	return clientClose
}

// maxResponseHeaderBytes bounds an upstream's status line and headers.
const maxResponseHeaderBytes = 1 << 20

func bodyAllowed(status int) bool {
	return !(status >= 100 && status < 200 || status == http.StatusNoContent || status == http.StatusNotModified)
}
