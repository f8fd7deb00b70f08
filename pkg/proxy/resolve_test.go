package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

func TestBlockedAddr(t *testing.T) {
	cases := []struct {
		ip      string
		blocked bool
	}{
		{"127.0.0.1", true}, {"127.255.0.9", true}, {"10.1.2.3", true}, {"172.16.0.1", true},
		{"172.31.255.255", true}, {"192.168.1.1", true}, {"100.64.0.1", true}, {"100.127.255.254", true},
		{"169.254.169.254", true}, {"224.0.0.251", true}, {"255.255.255.255", true}, {"0.0.0.0", true},
		{"::", true}, {"::1", true}, {"fc00::1", true}, {"fd12:3456::1", true}, {"fe80::1", true},
		{"ff02::1", true}, {"64:ff9b::a00:1", true}, {"2002:a00:1::", true},
		{"8.8.8.8", false}, {"1.1.1.1", false}, {"172.32.0.1", false}, {"100.128.0.1", false},
		{"2606:4700::1111", false}, {"64:ff9b::808:808", false},
		{"64:ff9b:1::808:808", true}, {"64:ff9b:1:ffff::a00:1", true}, {"::a00:1", true}, {"::808:808", true},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", true}, {"2001:4860::8888", false},
		{"192.0.2.10", true}, {"198.51.100.7", true}, {"203.0.113.200", true}, {"198.18.0.1", true},
		{"198.19.255.254", true}, {"240.0.0.1", true}, {"192.88.99.1", true}, {"198.20.0.1", false},
		{"203.0.114.1", false}, {"3fff::1", true}, {"2001:2::1", true}, {"2001:20::1", true}, {"5f00::1", true},
		{"2001:200::1", false},
	}
	for _, tc := range cases {
		a := netip.MustParseAddr(tc.ip)
		if got := blockedAddr(a.Unmap()); got != tc.blocked {
			t.Errorf("blockedAddr(%s) = %v, want %v", tc.ip, got, tc.blocked)
		}
	}
	// IPv4-mapped IPv6 is judged as IPv4 by the guard.
	p, err := New(Options{}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.guard(p.cfg.Load().cidrs, netip.MustParseAddr("::ffff:127.0.0.1")); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("mapped loopback passed the guard: %v", err)
	}
}

func TestGuardOwnInterfaceAddress(t *testing.T) {
	p, err := New(Options{}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := p.ifaces.get(time.Second)
	for _, a := range addrs {
		if err := p.guard(p.cfg.Load().cidrs, a); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("own interface address %s passed the guard", a)
		}
	}
}

// TestGuard runs the destination guard against operator ranges, with
// 10.213.0.1 (a tap gateway) and 192.168.1.5 (a LAN address) posing as
// addresses of the proxy host.
func TestGuard(t *testing.T) {
	pfx := func(ss ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, s := range ss {
			out = append(out, netip.MustParsePrefix(s))
		}
		return out
	}
	cases := []struct {
		name  string
		cidrs []netip.Prefix
		addr  string
		ok    bool
	}{
		{"public", nil, "8.8.8.8", true},
		{"tap gateway in broad range", pfx("10.0.0.0/8"), "10.213.0.1", false},
		{"tap gateway in its /24", pfx("10.213.0.0/24"), "10.213.0.1", false},
		{"tap gateway mapped", pfx("10.0.0.0/8"), "::ffff:10.213.0.1", false},
		{"tap gateway named exactly", pfx("10.0.0.0/8", "10.213.0.1/32"), "10.213.0.1", true},
		{"neighbour in range", pfx("10.0.0.0/8"), "10.213.0.2", true},
		{"private without range", nil, "10.213.0.2", false},
		{"lan address in range", pfx("192.168.0.0/16"), "192.168.1.5", false},
		{"lan address named exactly", pfx("192.168.1.5/32"), "192.168.1.5", true},
		{"loopback in 127/8", pfx("127.0.0.0/8"), "127.0.0.1", true},
		{"other loopback in 127/8", pfx("127.0.0.0/8"), "127.5.6.7", true},
		{"loopback in narrower range", pfx("127.5.0.0/16"), "127.5.6.7", true},
		{"loopback outside narrower range", pfx("127.5.0.0/16"), "127.0.0.1", false},
		{"loopback under everything", pfx("0.0.0.0/0"), "127.0.0.1", false},
		{"loopback under /7", pfx("126.0.0.0/7"), "127.0.0.1", false},
		{"loopback without range", nil, "127.0.0.1", false},
		{"ipv6 loopback exact", pfx("::1/128"), "::1", true},
		{"ipv6 loopback under everything", pfx("::/0"), "::1", false},
		{"unspecified in its range", pfx("0.0.0.0/8"), "0.0.0.0", false},
		{"metadata", nil, "169.254.169.254", false},
		{"metadata in range", pfx("169.254.0.0/16"), "169.254.169.254", true},
		{"everything range still guards host", pfx("0.0.0.0/0"), "10.213.0.1", false},
		{"nat64 public", nil, "64:ff9b::808:808", true},
		{"nat64 private", nil, "64:ff9b::a00:1", false},
		{"nat64 range allowed but embeds loopback", pfx("64:ff9b::/96"), "64:ff9b::7f00:1", false},
		{"nat64 embeds tap gateway", pfx("64:ff9b::/96", "10.0.0.0/8"), "64:ff9b::ad5:1", false},
		{"local nat64", nil, "64:ff9b:1::808:808", false},
		{"local nat64 in range", pfx("64:ff9b:1::/48"), "64:ff9b:1::808:808", true},
		{"local nat64 in range embeds metadata", pfx("64:ff9b:1::/48"), "64:ff9b:1::a9fe:a9fe", false},
		{"ipv4 compatible", nil, "::808:808", false},
		{"teredo", nil, "2001:0:4136:e378:8000:63bf:3fff:fdd2", false},
		{"6to4 private", nil, "2002:a00:1::", false},
		{"public ipv6", nil, "2001:4860::8888", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := New(Options{AllowCIDRs: tc.cidrs}, NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			// Pin the host's addresses: the real ones plus two stand-ins.
			addrs, nets := p.ifaces.get(time.Second)
			own := append(addrs, netip.MustParseAddr("10.213.0.1"), netip.MustParseAddr("192.168.1.5"))
			p.ifaces.mu.Lock()
			p.ifaces.addrs, p.ifaces.nets, p.ifaces.at = own, nets, time.Now().Add(time.Hour)
			p.ifaces.mu.Unlock()
			err = p.guard(p.cfg.Load().cidrs, netip.MustParseAddr(tc.addr))
			if tc.ok && err != nil {
				t.Errorf("guard(%s) = %v, want allowed", tc.addr, err)
			}
			if !tc.ok && !errors.Is(err, ErrPrivateAddress) {
				t.Errorf("guard(%s) = %v, want ErrPrivateAddress", tc.addr, err)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	pub := netip.MustParseAddr("93.184.215.7")
	hosts := map[string][]netip.Addr{
		"Mixed.Example.":   {netip.MustParseAddr("10.0.0.1"), pub, netip.MustParseAddr("::ffff:93.184.215.7")},
		"private.example":  {netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("169.254.169.254")},
		"loop.example":     {netip.MustParseAddr("127.0.0.1")},
		"metadata.example": {netip.MustParseAddr("169.254.169.254")},
	}
	p, err := New(Options{Hosts: hosts}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	got, err := p.Resolve(ctx, "mixed.example")
	if err != nil || len(got) != 1 || got[0] != pub {
		t.Fatalf("mixed: %v, %v", got, err)
	}
	for _, h := range []string{"private.example", "loop.example", "metadata.example", "127.0.0.1", "8.8.8.8"} {
		if _, err := p.Resolve(ctx, h); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("Resolve(%s) = %v, want ErrPrivateAddress", h, err)
		}
	}
	// An operator range opens exactly that range.
	if err := p.Reload(Options{Hosts: hosts, AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}); err != nil {
		t.Fatal(err)
	}
	if got, err := p.Resolve(ctx, "loop.example"); err != nil || got[0] != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("loop with CIDR: %v %v", got, err)
	}
	if _, err := p.Resolve(ctx, "metadata.example"); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("metadata still refused: %v", err)
	}
	if _, err := p.Resolve(ctx, "bad..name"); err == nil {
		t.Error("invalid name resolved")
	}
}

// TestResolveDNSServer runs a DNS server on loopback and points the
// resolver option at it.
func TestResolveDNSServer(t *testing.T) {
	resolver := nettest.DNS(t, map[string][]netip.Addr{
		"public.test": {netip.MustParseAddr("93.184.215.9")},
		"rebind.test": {netip.MustParseAddr("192.168.0.10")},
	})

	p, err := New(Options{Resolver: resolver}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Resolve(context.Background(), "public.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("93.184.215.9") {
		t.Fatalf("public.test: %v %v", got, err)
	}
	if _, err := p.Resolve(context.Background(), "rebind.test"); !errors.Is(err, ErrPrivateAddress) {
		t.Fatalf("rebind.test: %v", err)
	}
	if _, err := New(Options{Resolver: "not-an-address"}, NewRegistry()); err == nil {
		t.Fatal("bad resolver accepted")
	}
}

func TestParseSockaddr(t *testing.T) {
	v4 := make([]byte, 16)
	binary.NativeEndian.PutUint16(v4, afInet)
	v4[2], v4[3] = 0x01, 0xbb
	copy(v4[4:8], []byte{93, 184, 216, 34})
	got, err := parseSockaddr(v4)
	if err != nil || got != netip.MustParseAddrPort("93.184.216.34:443") {
		t.Fatalf("v4: %v %v", got, err)
	}
	v6 := make([]byte, 28)
	binary.NativeEndian.PutUint16(v6, afInet6)
	v6[2], v6[3] = 0, 80
	a := netip.MustParseAddr("2001:db8::5").As16()
	copy(v6[8:24], a[:])
	got, err = parseSockaddr(v6)
	if err != nil || got != netip.MustParseAddrPort("[2001:db8::5]:80") {
		t.Fatalf("v6: %v %v", got, err)
	}
	for _, b := range [][]byte{nil, {2}, v4[:6], v6[:20], {99, 0, 0, 0, 0, 0, 0, 0}} {
		if _, err := parseSockaddr(b); !errors.Is(err, ErrNoOriginalDst) {
			t.Errorf("parseSockaddr(%v) = %v", b, err)
		}
	}
}

// TestAuthorizeKeepsCIDRsAndLiteralsApart is the operator's case: allow_cidrs
// holds 10.0.0.0/8 so git.internal may resolve into it. That must not let the
// guest reach the rest of 10/8 by IP literal; only an allowlist entry does.
func TestAuthorizeKeepsCIDRsAndLiteralsApart(t *testing.T) {
	p, err := New(Options{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
		Hosts:      map[string][]netip.Addr{"git.internal": {netip.MustParseAddr("10.1.2.3")}},
	}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	// 10.213.0.1 poses as an address of the proxy host (a tap gateway).
	addrs, nets := p.ifaces.get(time.Second)
	p.ifaces.mu.Lock()
	p.ifaces.addrs, p.ifaces.nets, p.ifaces.at = append(addrs, netip.MustParseAddr("10.213.0.1")), nets, time.Now().Add(time.Hour)
	p.ifaces.mu.Unlock()
	cases := []struct {
		entries []string
		host    string
		reason  string
	}{
		{[]string{"git.internal"}, "git.internal", ""},
		{[]string{"git.internal"}, "10.9.9.9", ReasonAllowlist},
		{[]string{"git.internal"}, "10.1.2.3", ReasonAllowlist},
		{[]string{"git.internal", "*"}, "10.9.9.9", ReasonAllowlist},
		{[]string{"git.internal", "10.9.9.9"}, "10.9.9.9", ""},
		{[]string{"10.9.0.0/16"}, "10.9.9.9", ""},
		{[]string{"10.9.0.0/16"}, "10.10.0.1", ReasonAllowlist},
		{[]string{"10.0.0.0/8"}, "10.213.0.1", ReasonPrivateAddress},
		{[]string{"10.213.0.1"}, "10.213.0.1", ""},
		{[]string{"0.0.0.0/0"}, "169.254.169.254", ""},
		{[]string{"10.0.0.0/8"}, "169.254.169.254", ReasonAllowlist},
	}
	for _, tc := range cases {
		l, err := allow.Parse(tc.entries)
		if err != nil {
			t.Fatal(err)
		}
		v := p.authorize(context.Background(), p.cfg.Load(), Client{ID: "c", Allow: l}, tc.host, 443)
		if v.reason != tc.reason {
			t.Errorf("allow %v, %s:443: reason %q (%s), want %q", tc.entries, tc.host, v.reason, v.detail, tc.reason)
		}
	}
}
