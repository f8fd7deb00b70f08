package proxy

import (
	"errors"
	"testing"
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
