package proxy

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/miekg/dns"
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
	if err := p.guard(p.cfg.Load(), netip.MustParseAddr("::ffff:127.0.0.1")); !errors.Is(err, ErrPrivateAddress) {
		t.Errorf("mapped loopback passed the guard: %v", err)
	}
}

func TestGuardOwnInterfaceAddress(t *testing.T) {
	p, err := New(Options{}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range p.ifaces.get() {
		if err := p.guard(p.cfg.Load(), a); !errors.Is(err, ErrPrivateAddress) {
			t.Errorf("own interface address %s passed the guard", a)
		}
	}
}

func TestResolve(t *testing.T) {
	pub := netip.MustParseAddr("203.0.113.7")
	hosts := map[string][]netip.Addr{
		"Mixed.Example.":   {netip.MustParseAddr("10.0.0.1"), pub, netip.MustParseAddr("::ffff:203.0.113.7")},
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
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		q := r.Question[0]
		if q.Qtype == dns.TypeA {
			switch q.Name {
			case "public.test.":
				rr, _ := dns.NewRR("public.test. 60 IN A 203.0.113.9")
				m.Answer = append(m.Answer, rr)
			case "rebind.test.":
				rr, _ := dns.NewRR("rebind.test. 60 IN A 192.168.0.10")
				m.Answer = append(m.Answer, rr)
			}
		}
		w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go srv.ActivateAndServe()
	defer srv.Shutdown()

	p, err := New(Options{Resolver: pc.LocalAddr().String()}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Resolve(context.Background(), "public.test")
	if err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("203.0.113.9") {
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
