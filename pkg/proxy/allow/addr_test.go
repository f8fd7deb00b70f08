package allow

import (
	"strings"
	"testing"
)

// TestSplitHostPortRefusesHostile: the grammar is the boundary both the
// allowlist and the proxy's CONNECT/Host parsing stand on, so every input
// either of the two grammars it replaced refused is refused here.
func TestSplitHostPortRefusesHostile(t *testing.T) {
	cases := []struct {
		in  string
		why string // substring of the error
	}{
		{"example.com:", "empty port"},
		{":443", "empty host"},
		{"[]:443", "not an IP address"},
		{"example.com:0", "must be a number 1..65535"},
		{"example.com:65536", "must be a number 1..65535"},
		{"example.com:99999999999999999999", "must be a number 1..65535"},
		{"example.com:https", "must be a number 1..65535"},
		{"example.com:+443", "must be a number 1..65535"},
		{"example.com:-1", "must be a number 1..65535"},
		{"example.com:0443", "must be a number 1..65535"},
		{"example.com: 443", "must be a number 1..65535"},
		{"example.com:443\x00", "must be a number 1..65535"},
		{"example.com:４４３", "must be a number 1..65535"},
		{"::1:443", "must be in brackets"},
		{"2001:db8::1:443", "must be in brackets"},
		{"a:b:c", "must be in brackets"},
		{"[::1", "unclosed"},
		{"[::1]x", "unexpected"},
		{"[::1]:", "empty port"},
		{"[::1]:80:81", "must be a number 1..65535"},
		{"[::1]]:80", "unexpected"},
		{"[::1][::2]:80", "unexpected"},
		{"[example.com]:443", "not an IP address"},
		{"[10.0.0.1]:443", "not an IP address"},
		{"[fe80::1%25eth0]:443", "zone"},
		{"[fe80::1%eth0]", "zone"},
	}
	for _, tc := range cases {
		h, p, err := SplitHostPort(tc.in)
		if err == nil {
			t.Errorf("SplitHostPort(%q) = %q, %d; want refused", tc.in, h, p)
			continue
		}
		if !strings.Contains(err.Error(), tc.why) {
			t.Errorf("SplitHostPort(%q) error %q lacks %q", tc.in, err, tc.why)
		}
	}
}

func TestSplitHostPort(t *testing.T) {
	cases := []struct {
		in   string
		host string
		port int
	}{
		{"example.com", "example.com", 0},
		{"example.com:443", "example.com", 443},
		{"*.example.com:8443", "*.example.com", 8443},
		{"10.0.0.0/8:22", "10.0.0.0/8", 22},
		{"[::1]", "::1", 0},
		{"[2001:db8::1]:65535", "2001:db8::1", 65535},
		{"[2001:db8::/32]:1", "2001:db8::/32", 1},
	}
	for _, tc := range cases {
		h, p, err := SplitHostPort(tc.in)
		if err != nil || h != tc.host || p != tc.port {
			t.Errorf("SplitHostPort(%q) = %q, %d, %v; want %q, %d", tc.in, h, p, err, tc.host, tc.port)
		}
	}
}
