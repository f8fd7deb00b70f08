package proxy

import (
	"errors"
	"testing"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

func TestParseAuthority(t *testing.T) {
	cases := []struct {
		in   string
		def  int
		host string
		port int
	}{
		{"example.com:443", 0, "example.com", 443},
		{"example.com", 80, "example.com", 80},
		{"[::1]:8080", 0, "::1", 8080},
		{"[2001:db8::1]", 80, "2001:db8::1", 80},
		{"10.0.0.1:22", 0, "10.0.0.1", 22},
		{"EXAMPLE.com.:443", 0, "EXAMPLE.com.", 443},
	}
	for _, tc := range cases {
		h, p, err := parseAuthority(tc.in, tc.def)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("parseAuthority(%q, %d) = %q, %d, %v", tc.in, tc.def, h, p, err)
		}
	}
	for _, in := range []string{"", "example.com", ":443", "example.com:", "example.com:0", "example.com:65536",
		"example.com:https", "example.com:+443", "example.com:0443", "::1:443", "[::1", "[::1]x", "[::1]:",
		"[example.com]:443", "user@example.com:443", "example.com:443/path", "a b:80"} {
		if h, p, err := parseAuthority(in, 0); !errors.Is(err, ErrBadAuthority) {
			t.Errorf("parseAuthority(%q) = %q, %d, %v; want ErrBadAuthority", in, h, p, err)
		}
	}
}

// TestHostileAuthoritiesRefusedByBoth: the allowlist and the proxy parse
// host[:port] by one grammar; each of these was refused by both before they
// shared it and must stay refused by both, as an allow entry and as a
// CONNECT target.
func TestHostileAuthoritiesRefusedByBoth(t *testing.T) {
	for _, in := range []string{
		"", ":443", "example.com:", "example.com:0", "example.com:65536", "example.com:99999999999999999999",
		"example.com:https", "example.com:+443", "example.com:-1", "example.com:0443", "example.com: 443",
		"example.com:４４３", "a:b:c", "[::1", "[::1]x", "[::1]:", "[::1]:80:81", "[::1]]:80",
		"[::1][::2]:80", "[example.com]:443", "user@example.com:443",
		"example.com:443/path", "example.com:443?x", "example.com:443#x", "a b:80", "http://example.com:80",
		// Refused by one of the two before, and by both since they share
		// the strictest: an IPv4 address in brackets, a zone in brackets.
		"[10.0.0.1]:443", "[fe80::1%eth0]:443", "[fe80::1%25eth0]:443",
	} {
		if h, p, err := parseAuthority(in, 0); !errors.Is(err, ErrBadAuthority) {
			t.Errorf("parseAuthority(%q) = %q, %d, %v; want ErrBadAuthority", in, h, p, err)
		}
		if _, err := allow.Parse([]string{in}); !errors.Is(err, allow.ErrInvalidEntry) {
			t.Errorf("allow.Parse(%q) = %v; want ErrInvalidEntry", in, err)
		}
	}
}
