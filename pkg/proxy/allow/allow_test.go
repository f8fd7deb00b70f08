package allow

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	type probe struct {
		host string
		port int
		want error // nil, ErrHostNotAllowed or ErrPortNotAllowed
	}
	cases := []struct {
		name    string
		entries []string
		probes  []probe
	}{
		{"exact", []string{"example.com"}, []probe{
			{"example.com", 443, nil},
			{"example.com", 80, nil},
			{"EXAMPLE.com.", 443, nil},
			{"www.example.com", 443, ErrHostNotAllowed},
			{"notexample.com", 443, ErrHostNotAllowed},
			{"example.com.evil.net", 443, ErrHostNotAllowed},
			{"com", 443, ErrHostNotAllowed},
			{"example.com", 22, ErrPortNotAllowed},
			{"example.com..", 443, ErrHostNotAllowed},
		}},
		{"star subdomains only", []string{"*.example.com"}, []probe{
			{"a.example.com", 443, nil},
			{"a.b.c.example.com", 443, nil},
			{"example.com", 443, ErrHostNotAllowed},
			{"badexample.com", 443, ErrHostNotAllowed},
			{"a.example.com", 8080, ErrPortNotAllowed},
		}},
		{"dot apex and subdomains", []string{".example.com"}, []probe{
			{"example.com", 443, nil},
			{"x.y.example.com", 80, nil},
			{"xexample.com", 443, ErrHostNotAllowed},
		}},
		{"explicit port", []string{"example.com:8443"}, []probe{
			{"example.com", 8443, nil},
			{"example.com", 443, ErrPortNotAllowed},
		}},
		{"explicit and default ports combine", []string{"example.com", "example.com:8443"}, []probe{
			{"example.com", 443, nil},
			{"example.com", 8443, nil},
			{"example.com", 22, ErrPortNotAllowed},
		}},
		{"wildcard with port", []string{"*.example.com:22"}, []probe{
			{"git.example.com", 22, nil},
			{"git.example.com", 443, ErrPortNotAllowed},
		}},
		{"any host", []string{"*"}, []probe{
			{"anything.example", 443, nil},
			{"x", 80, nil},
			{"x", 25, ErrPortNotAllowed},
		}},
		{"any host any listed port", []string{"*:25"}, []probe{
			{"mail.example", 25, nil},
			{"mail.example", 443, ErrPortNotAllowed},
		}},
		{"idn entry matches punycode and unicode", []string{"bücher.de"}, []probe{
			{"xn--bcher-kva.de", 443, nil},
			{"BÜCHER.de", 443, nil},
			{"bucher.de", 443, ErrHostNotAllowed},
		}},
		{"punycode entry matches unicode host", []string{"*.xn--bcher-kva.de"}, []probe{
			{"shop.bücher.de", 443, nil},
		}},
		{"ip literals never match", []string{"*"}, []probe{
			{"127.0.0.1", 443, ErrHostNotAllowed},
			{"::1", 443, ErrHostNotAllowed},
			{"[::1]", 443, ErrHostNotAllowed},
		}},
		{"invalid hosts are denied", []string{"*"}, []probe{
			{"", 443, ErrHostNotAllowed},
			{"a..b", 443, ErrHostNotAllowed},
			{"a b.com", 443, ErrHostNotAllowed},
			{strings.Repeat("a", 64) + ".com", 443, ErrHostNotAllowed},
		}},
		{"empty list", nil, []probe{
			{"example.com", 443, ErrHostNotAllowed},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			l, err := Parse(tc.entries)
			if err != nil {
				t.Fatalf("Parse(%q): %v", tc.entries, err)
			}
			for _, p := range tc.probes {
				err := l.Check(p.host, p.port)
				if p.want == nil && err != nil || p.want != nil && !errors.Is(err, p.want) {
					t.Errorf("Check(%q, %d) = %v, want %v", p.host, p.port, err, p.want)
				}
			}
		})
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct {
		entry string
		why   string // substring of the error
	}{
		{"", "empty entry"},
		{"   ", "empty entry"},
		{"ex*ample.com", "'*' is only allowed"},
		{"*example.com", "'*' is only allowed"},
		{"a.*.example.com", "'*' is only allowed"},
		{"*.*.example.com", "'*' is only allowed"},
		{"example.*", "'*' is only allowed"},
		{"**", "'*' is only allowed"},
		{"*.com", "top-level domain"},
		{".com", "top-level domain"},
		{"*.com.", "top-level domain"},
		{"*.co.uk", "public suffix"},
		{".co.uk", "public suffix"},
		{"*.", "empty"},
		{".", "empty"},
		{"a..example.com", "empty label"},
		{".example..com", "empty label"},
		{"example.com..", "empty label"},
		{"exa_mple!.com", "illegal character"},
		{"exa$mple.com", "illegal character"},
		{"-bad.example.com", "starts or ends with '-'"},
		{"bad-.example.com", "starts or ends with '-'"},
		{strings.Repeat("a", 64) + ".com", "limit is 63"},
		{strings.Repeat("abcdefghi.", 26) + "com", "limit is 253"},
		{"https://example.com", "not a URL"},
		{"example.com/path", "not a URL"},
		{"user@example.com", "not a URL"},
		{"example.com:0", "must be a number 1..65535"},
		{"example.com:65536", "must be a number 1..65535"},
		{"example.com:http", "must be a number 1..65535"},
		{"example.com:", "must be a number 1..65535"},
		{"example.com:+443", "must be a number 1..65535"},
		{"example.com:0443", "must be a number 1..65535"},
		{"10.0.0.1/24", "host bits set; did you mean 10.0.0.0/24"},
		{"10.0.0.0/33", "not a CIDR range"},
		{"10.0.0.1:0", "must be a number 1..65535"},
		{"[::1", "unclosed"},
		{"[::1]x", "unexpected"},
		{"[::1]:", "empty port"},
		{"[example.com]:443", "not an IP address"},
		{"fe80::1%eth0", "zone"},
		{"::ffff:10.0.0.0/104", "IPv4 form"},
		{"*.10.0.0.1", "no wildcard"},
		{"10.0.0.1.", "no wildcard or trailing dot"},
		{"xn--zz.example.com", "punycode"},
	}
	for _, tc := range cases {
		t.Run(tc.entry, func(t *testing.T) {
			_, err := Parse([]string{"ok.example.com", tc.entry})
			if err == nil {
				t.Fatalf("Parse accepted %q", tc.entry)
			}
			if !errors.Is(err, ErrInvalidEntry) {
				t.Errorf("error %v does not wrap ErrInvalidEntry", err)
			}
			if !strings.Contains(err.Error(), tc.why) {
				t.Errorf("error %q lacks %q", err, tc.why)
			}
			if !strings.Contains(err.Error(), "\""+strings.TrimSpace(tc.entry)) && tc.entry != "   " {
				t.Errorf("error %q does not name the entry %q", err, tc.entry)
			}
		})
	}
}

func TestEntriesNormalizedAndStable(t *testing.T) {
	l, err := Parse([]string{"Zeta.example.com.", "*.Example.com", "bücher.de", ".example.org:8443", "zeta.example.com", "*"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"*", "*.example.com", ".example.org:8443", "xn--bcher-kva.de", "zeta.example.com"}
	if got := l.Entries(); !slices.Equal(got, want) {
		t.Fatalf("Entries() = %q, want %q", got, want)
	}
	// Entries must parse back to the same list.
	l2, err := Parse(l.Entries())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(l2.Entries(), want) {
		t.Fatalf("round trip = %q", l2.Entries())
	}
}

func TestWith(t *testing.T) {
	base, err := Parse([]string{"a.example.com", "b.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	n, err := base.With([]string{"C.example.com."}, []string{"A.EXAMPLE.COM", "absent.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := n.Entries(), []string{"b.example.com", "c.example.com"}; !slices.Equal(got, want) {
		t.Fatalf("With entries = %q, want %q", got, want)
	}
	if got := base.Entries(); !slices.Equal(got, []string{"a.example.com", "b.example.com"}) {
		t.Fatalf("receiver changed: %q", got)
	}
	if err := n.Check("a.example.com", 443); !errors.Is(err, ErrHostNotAllowed) {
		t.Fatalf("removed host still allowed: %v", err)
	}
	if _, err := base.With([]string{"*.com"}, nil); !errors.Is(err, ErrInvalidEntry) {
		t.Fatalf("With accepted a bad entry: %v", err)
	}
	var nilList *List
	n, err = nilList.With([]string{"x.example.com"}, nil)
	if err != nil || n.Check("x.example.com", 443) != nil {
		t.Fatalf("With on nil list: %v", err)
	}
}

func TestParseWithPorts(t *testing.T) {
	l, err := ParseWithPorts([]string{"example.com", "example.com:22"}, []int{8080})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		port int
		want error
	}{{8080, nil}, {22, nil}, {443, ErrPortNotAllowed}, {80, ErrPortNotAllowed}} {
		if err := l.Check("example.com", tc.port); tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
			t.Errorf("port %d: %v, want %v", tc.port, err, tc.want)
		}
	}
	if err := l.CheckWithPorts("example.com", 443, []int{443}); err != nil {
		t.Errorf("CheckWithPorts override: %v", err)
	}
	if _, err := ParseWithPorts(nil, []int{0}); !errors.Is(err, ErrInvalidEntry) {
		t.Errorf("port 0 accepted: %v", err)
	}
}

func TestNormalizeHost(t *testing.T) {
	cases := []struct{ in, want, errPart string }{
		{"Example.COM.", "example.com", ""},
		{"bücher.de", "xn--bcher-kva.de", ""},
		{"ＥＸＡＭＰＬＥ.com", "example.com", ""},
		{"a。b.com", "a.b.com", ""},
		{"_dmarc.example.com", "_dmarc.example.com", ""},
		{"[::1]", "::1", ""},
		{"::ffff:10.0.0.1", "10.0.0.1", ""},
		{"", "", "empty"},
		{".", "", "empty"},
		{"a..b", "", "empty label"},
		{"a/b", "", "illegal character"},
		{"a\x00b", "", ""},
	}
	for _, tc := range cases {
		got, err := NormalizeHost(tc.in)
		if tc.want != "" {
			if err != nil || got != tc.want {
				t.Errorf("NormalizeHost(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
			continue
		}
		if err == nil {
			t.Errorf("NormalizeHost(%q) = %q, want error", tc.in, got)
			continue
		}
		if !errors.Is(err, ErrInvalidHost) || !strings.Contains(err.Error(), tc.errPart) {
			t.Errorf("NormalizeHost(%q) error %q, want ErrInvalidHost containing %q", tc.in, err, tc.errPart)
		}
	}
}

// TestAddressEntries: address entries allow exactly the IP literals they
// cover, and only those; names never match them and "*" never matches a literal.
func TestAddressEntries(t *testing.T) {
	l, err := Parse([]string{"192.0.2.10", "10.20.0.0/16:8443", "[2001:DB8::1]:443", "::ffff:198.51.100.7", "*"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Entries(), []string{"*", "10.20.0.0/16:8443", "192.0.2.10", "198.51.100.7", "[2001:db8::1]:443"}; !slices.Equal(got, want) {
		t.Errorf("entries %q, want %q", got, want)
	}
	probes := []struct {
		host string
		port int
		want error
	}{
		{"192.0.2.10", 443, nil},
		{"192.0.2.10", 80, nil},
		{"::ffff:192.0.2.10", 443, nil},
		{"192.0.2.10", 22, ErrPortNotAllowed},
		{"192.0.2.11", 443, ErrHostNotAllowed},
		{"10.20.3.4", 8443, nil},
		{"10.20.3.4", 443, ErrPortNotAllowed},
		{"10.21.0.1", 8443, ErrHostNotAllowed},
		{"[2001:db8::1]", 443, nil},
		{"2001:db8::1", 80, ErrPortNotAllowed},
		{"198.51.100.7", 443, nil},
		{"8.8.8.8", 443, ErrHostNotAllowed}, // "*" is for names only
		{"example.com", 443, nil},
	}
	for _, p := range probes {
		err := l.Check(p.host, p.port)
		if p.want == nil && err != nil || p.want != nil && !errors.Is(err, p.want) {
			t.Errorf("Check(%s, %d) = %v, want %v", p.host, p.port, err, p.want)
		}
	}
	names, _ := Parse([]string{"*", "example.com"})
	if err := names.Check("192.0.2.10", 443); !errors.Is(err, ErrHostNotAllowed) {
		t.Errorf("a names-only list allowed an IP literal: %v", err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.20.0.0/16"), netip.MustParsePrefix("192.0.2.10/32"),
		netip.MustParsePrefix("198.51.100.7/32"), netip.MustParsePrefix("2001:db8::1/128")}
	if got := l.Prefixes(); !slices.Equal(got, want) {
		t.Errorf("prefixes %v, want %v", got, want)
	}
}

// TestEffectivePorts: the one default-ports rule, and a caller cannot change
// DefaultPorts through what it returns.
func TestEffectivePorts(t *testing.T) {
	for _, c := range []struct {
		in   [][]int
		want []int
	}{
		{nil, []int{80, 443}},
		{[][]int{nil, {}}, []int{80, 443}},
		{[][]int{{8443}, {8080}}, []int{8443}},
		{[][]int{nil, {8080}}, []int{8080}},
	} {
		got := EffectivePorts(c.in...)
		if !slices.Equal(got, c.want) {
			t.Errorf("EffectivePorts(%v) = %v, want %v", c.in, got, c.want)
		}
		got[0] = 1
	}
	if !slices.Equal(DefaultPorts, []int{80, 443}) {
		t.Fatalf("DefaultPorts changed through a result: %v", DefaultPorts)
	}
}
