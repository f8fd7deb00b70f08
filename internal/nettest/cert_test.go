package nettest

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"
)

// TestNewCertServesTLS: a server with the leaf is trusted through Pool and through the
// PEM, for its names only.
func TestNewCertServesTLS(t *testing.T) {
	c := NewCert(t, "nettest CA", "api.test", "alt.test")
	block, _ := pem.Decode(c.CAPEM)
	ca, err := x509.ParseCertificate(block.Bytes)
	if err != nil || !ca.IsCA {
		t.Fatalf("CAPEM: %v, IsCA %v", err, ca != nil && ca.IsCA)
	}
	ln := Listen(t, "")
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{c.Leaf}}}
	go srv.ServeTLS(ln, "", "")
	t.Cleanup(func() { srv.Close() })
	for _, tc := range []struct {
		name string
		ok   bool
	}{{"api.test", true}, {"alt.test", true}, {"evil.test", false}} {
		conn, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: c.Pool, ServerName: tc.name})
		if err == nil {
			conn.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("%s: handshake err %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}
