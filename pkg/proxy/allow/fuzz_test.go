package allow

import (
	"errors"
	"net/netip"
	"strings"
	"testing"
)

func FuzzParse(f *testing.F) {
	for _, s := range []string{"example.com", "*.example.com", ".example.com", "*", "*:443",
		"example.com:8443", "bücher.de", "*.com", "a..b", "[::1]:80", "xn--bcher-kva.de", "ex*mple.com",
		"10.0.0.0/8", "192.0.2.1:8080", "[2001:db8::/32]:443", "::ffff:1.2.3.4"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, entry string) {
		l, err := Parse([]string{entry})
		if err != nil {
			if !errors.Is(err, ErrInvalidEntry) {
				t.Fatalf("Parse(%q) error %v does not wrap ErrInvalidEntry", entry, err)
			}
			return
		}
		// A valid entry must normalize to something that parses to itself.
		es := l.Entries()
		if len(es) != 1 {
			t.Fatalf("Parse(%q) gave %d entries", entry, len(es))
		}
		l2, err := Parse(es)
		if err != nil {
			t.Fatalf("normalized %q of %q does not parse: %v", es[0], entry, err)
		}
		if l2.Entries()[0] != es[0] {
			t.Fatalf("normalization not idempotent: %q -> %q -> %q", entry, es[0], l2.Entries()[0])
		}
	})
}

func FuzzMatch(f *testing.F) {
	f.Add("*.example.com", "a.example.com", 443)
	f.Add(".example.com", "example.com", 80)
	f.Add("example.com:8443", "EXAMPLE.COM.", 8443)
	f.Add("*", "127.0.0.1", 443)
	f.Add("10.0.0.0/8", "10.1.2.3", 443)
	f.Add("[2001:db8::1]:8443", "[2001:db8::1]", 8443)
	f.Add("bücher.de", "xn--bcher-kva.de", 443)
	f.Fuzz(func(t *testing.T, entry, host string, port int) {
		l, err := Parse([]string{entry})
		if err != nil {
			return
		}
		err = l.Check(host, port)
		if err != nil && !errors.Is(err, ErrHostNotAllowed) && !errors.Is(err, ErrPortNotAllowed) {
			t.Fatalf("Check(%q,%d) with %q: unexpected error kind %v", host, port, entry, err)
		}
		if err != nil {
			return
		}
		// Anything allowed must be inside the entry's scope: a name for a
		// name entry, an address in the range for an address entry.
		h, nerr := NormalizeHost(host)
		if nerr != nil {
			t.Fatalf("allowed invalid host %q: %v", host, nerr)
		}
		base := l.rules[0].host
		a, aerr := netip.ParseAddr(h)
		if (l.rules[0].kind == kindAddr) != (aerr == nil) {
			t.Fatalf("entry %q allowed %q: names and addresses must not cross", entry, h)
		}
		switch l.rules[0].kind {
		case kindAddr:
			if !l.rules[0].pfx.Contains(a) {
				t.Fatalf("address entry %q allowed %q", entry, h)
			}
		case kindExact:
			if h != base {
				t.Fatalf("exact %q allowed %q", entry, h)
			}
		case kindSub:
			if !strings.HasSuffix(h, "."+base) {
				t.Fatalf("wildcard %q allowed %q", entry, h)
			}
		case kindTree:
			if h != base && !strings.HasSuffix(h, "."+base) {
				t.Fatalf("tree %q allowed %q", entry, h)
			}
		}
		if p := l.rules[0].port; p != 0 && p != port {
			t.Fatalf("entry %q allowed port %d", entry, port)
		}
	})
}
