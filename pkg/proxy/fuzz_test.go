package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

func FuzzParseAuthority(f *testing.F) {
	for _, s := range []string{"example.com:443", "[::1]:8080", "example.com", "a:b:c", "[::1]", "[x]:1",
		"host:0", "host:65536", "host:", ":80", "user@host:80", "host:+80", "[fe80::1%25eth0]:443"} {
		f.Add(s, 0)
		f.Add(s, 80)
	}
	f.Fuzz(func(t *testing.T, s string, def int) {
		if def < 0 || def > 65535 {
			return
		}
		host, port, err := parseAuthority(s, def)
		if err != nil {
			if !errors.Is(err, ErrBadAuthority) {
				t.Fatalf("error %v does not wrap ErrBadAuthority", err)
			}
			return
		}
		if host == "" || port < 1 || port > 65535 {
			t.Fatalf("parseAuthority(%q) = %q, %d", s, host, port)
		}
		if strings.ContainsAny(host, "@/ ") {
			t.Fatalf("host %q has forbidden characters", host)
		}
		if !strings.Contains(s, host) {
			t.Fatalf("host %q not from input %q", host, s)
		}
		if strings.Contains(host, ":") {
			if _, err := netip.ParseAddr(strings.Split(host, "%")[0]); err != nil && !strings.HasPrefix(s, "[") {
				t.Fatalf("unbracketed colon host %q from %q", host, s)
			}
		}
		if p := strconv.Itoa(port); !strings.HasSuffix(s, ":"+p) && port != def {
			t.Fatalf("port %d from %q", port, s)
		}
	})
}

// FuzzPeek feeds arbitrary bytes to the ClientHello peeker: it must never
// panic, must return exactly the bytes it consumed, and any name it returns
// must be a valid, normalized, non-IP host.
func FuzzPeek(f *testing.F) {
	f.Add(records(buildClientHello("example.com", 0), 1<<14))
	f.Add(records(buildClientHello("big.example.com", 16<<10), 1<<14))
	f.Add(records(buildClientHello("split.example.com", 300), 7))
	f.Add(records(buildClientHello("", 0), 1<<14))
	f.Add([]byte("GET / HTTP/1.1\r\nHost: example.com\r\n\r\n"))
	f.Add([]byte{22, 3, 1, 0, 4, 1, 0, 0, 0})
	f.Add([]byte("GET / HTTP/1.0\r\n\r\n"))
	f.Add([]byte("GET http://a.example:99/ HTTP/1.1\r\nHost: b.example\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 && in[0] != recordHandshake {
			// The plain-HTTP side of the peeker: the Host a transparent
			// connection is decided by.
			req, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(in)))
			if err != nil {
				return
			}
			s := &httpSession{tport: 80}
			host, port, err := s.target(req)
			if err != nil {
				return
			}
			if port != 80 || host == "" || strings.ContainsAny(host, "/@ ") {
				t.Fatalf("target %q:%d from %q", host, port, in)
			}
			return
		}
		r := bytes.NewReader(in)
		raw, sni, err := readClientHello(bufio.NewReader(r))
		if len(raw) > len(in) || !bytes.Equal(raw, in[:len(raw)]) {
			t.Fatalf("raw is not a prefix of the input")
		}
		if err != nil {
			if sni != "" {
				t.Fatalf("error with a name: %q %v", sni, err)
			}
			return
		}
		n, nerr := allow.NormalizeHost(sni)
		if nerr != nil || n != sni {
			t.Fatalf("sni %q not normalized: %q %v", sni, n, nerr)
		}
		if _, perr := netip.ParseAddr(sni); perr == nil {
			t.Fatalf("sni %q is an IP literal", sni)
		}
	})
}
