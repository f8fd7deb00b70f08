package nettest

import (
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
)

// HTTPSEcho is an HTTPS upstream (HTTP/1.1 and HTTP/2, with httptest's own certificate)
// that keeps each request's first line ("host path?query") and headers, and
// answers with the same text, so a test sees both what reached the upstream and
// what the client got back.
type HTTPSEcho struct {
	Server *httptest.Server
	mu     sync.Mutex
	seen   strings.Builder
}

// NewHTTPSEcho starts an HTTPSEcho, closed at cleanup.
func NewHTTPSEcho(t testing.TB) *HTTPSEcho {
	t.Helper()
	e := &HTTPSEcho{}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s?%s\n", r.Host, r.URL.Path, r.URL.RawQuery)
		r.Header.Write(&b)
		e.mu.Lock()
		e.seen.WriteString(b.String() + "\n")
		e.mu.Unlock()
		io.WriteString(w, b.String())
	}))
	e.Server.EnableHTTP2 = true
	e.Server.StartTLS()
	t.Cleanup(e.Server.Close)
	return e
}

// Requests is everything received so far.
func (e *HTTPSEcho) Requests() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen.String()
}

// Port is the loopback port the upstream listens on.
func (e *HTTPSEcho) Port() uint16 {
	return e.Server.Listener.Addr().(interface{ AddrPort() netip.AddrPort }).AddrPort().Port()
}

// Roots trusts the upstream's certificate alone.
func (e *HTTPSEcho) Roots() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(e.Server.Certificate())
	return p
}
