package dns

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	mdns "github.com/miekg/dns"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

type recorder struct {
	mu sync.Mutex
	qs []Query
}

func (r *recorder) add(q Query) { r.mu.Lock(); r.qs = append(r.qs, q); r.mu.Unlock() }

// responder starts a Server on loopback in front of a real proxy resolver.
func responder(t *testing.T, ipv6 bool, rec *recorder) *Server {
	t.Helper()
	p, err := proxy.New(proxy.Options{
		Resolver: nettest.DNS(t, map[string][]netip.Addr{"real.test": {netip.MustParseAddr("93.184.215.20")}}),
		Hosts: map[string][]netip.Addr{
			"good.test":       {netip.MustParseAddr("93.184.215.10"), netip.MustParseAddr("2001:4860::10")},
			"sub.wild.test":   {netip.MustParseAddr("93.184.215.11")},
			"ported.test":     {netip.MustParseAddr("93.184.215.12")},
			"inside.test":     {netip.MustParseAddr("10.0.0.5")},
			"metadata.test":   {netip.MustParseAddr("169.254.169.254")},
			"mixed.test":      {netip.MustParseAddr("192.168.1.1"), netip.MustParseAddr("93.184.215.13")},
			"unlisted.test":   {netip.MustParseAddr("93.184.215.14")},
			"loopback6.test":  {netip.MustParseAddr("::1")},
			"many.good.test":  {},
			"only6.good.test": {netip.MustParseAddr("2001:4860::11")},
		},
	}, proxy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	l, err := allow.Parse([]string{"good.test", ".good.test", "*.wild.test", "ported.test:8443", "inside.test", "metadata.test", "mixed.test", "real.test", "missing.test", "loopback6.test"})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Addr: "127.0.0.1:0", Allowed: HostAllowed(l), Resolve: p.Resolve, IPv6: ipv6}
	if rec != nil {
		cfg.OnQuery = rec.add
	}
	s, err := Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func exchange(t *testing.T, net, addr string, m *mdns.Msg) *mdns.Msg {
	t.Helper()
	c := &mdns.Client{Net: net, Timeout: 3 * time.Second}
	r, _, err := c.Exchange(m, addr)
	if err != nil {
		t.Fatalf("exchange %s over %s: %v", m.Question[0].Name, net, err)
	}
	return r
}

func answers(r *mdns.Msg) []string {
	var out []string
	for _, rr := range r.Answer {
		switch v := rr.(type) {
		case *mdns.A:
			out = append(out, v.A.String())
		case *mdns.AAAA:
			out = append(out, v.AAAA.String())
		}
	}
	sort.Strings(out)
	return out
}

func TestResponder(t *testing.T) {
	v4 := responder(t, false, nil)
	v6 := responder(t, true, nil)
	tests := []struct {
		name   string
		srv    *Server
		qname  string
		qtype  uint16
		qclass uint16
		rcode  int
		want   []string
	}{
		{"allowed A", v4, "good.test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.10"}},
		{"case and trailing dot", v4, "GOOD.Test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.10"}},
		{"AAAA with IPv6 off is empty", v4, "good.test.", mdns.TypeAAAA, 0, mdns.RcodeSuccess, nil},
		{"AAAA with IPv6 on", v6, "good.test.", mdns.TypeAAAA, 0, mdns.RcodeSuccess, []string{"2001:4860::10"}},
		{"A of a v6-only name is empty", v4, "only6.good.test.", mdns.TypeA, 0, mdns.RcodeSuccess, nil},
		{"wildcard entry", v4, "sub.wild.test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.11"}},
		{"wildcard does not cover apex", v4, "wild.test.", mdns.TypeA, 0, mdns.RcodeNameError, nil},
		{"entry with a port allows the name", v4, "ported.test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.12"}},
		{"unlisted name", v4, "unlisted.test.", mdns.TypeA, 0, mdns.RcodeNameError, nil},
		{"unlisted AAAA", v6, "unlisted.test.", mdns.TypeAAAA, 0, mdns.RcodeNameError, nil},
		{"unlisted TXT (tunnel attempt)", v4, "aGVsbG8.exfil.example.", mdns.TypeTXT, 0, mdns.RcodeNameError, nil},
		{"private answer refused", v4, "inside.test.", mdns.TypeA, 0, mdns.RcodeRefused, nil},
		{"metadata answer refused", v4, "metadata.test.", mdns.TypeA, 0, mdns.RcodeRefused, nil},
		{"loopback v6 answer refused", v6, "loopback6.test.", mdns.TypeAAAA, 0, mdns.RcodeRefused, nil},
		{"private part of mixed answer dropped", v4, "mixed.test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.13"}},
		{"resolved upstream", v4, "real.test.", mdns.TypeA, 0, mdns.RcodeSuccess, []string{"93.184.215.20"}},
		{"allowed but nonexistent upstream", v4, "missing.test.", mdns.TypeA, 0, mdns.RcodeNameError, nil},
		{"ANY refused", v4, "good.test.", mdns.TypeANY, 0, mdns.RcodeRefused, nil},
		{"AXFR refused", v4, "good.test.", mdns.TypeAXFR, 0, mdns.RcodeRefused, nil},
		{"other type for allowed name is empty", v4, "good.test.", mdns.TypeMX, 0, mdns.RcodeSuccess, nil},
		{"CHAOS class refused", v4, "version.bind.", mdns.TypeTXT, mdns.ClassCHAOS, mdns.RcodeRefused, nil},
		{"IP literal name", v4, "93.184.215.10.", mdns.TypeA, 0, mdns.RcodeNameError, nil},
		{"reverse lookup", v4, "10.113.0.203.in-addr.arpa.", mdns.TypePTR, 0, mdns.RcodeNameError, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, network := range []string{"udp", "tcp"} {
				m := new(mdns.Msg)
				m.SetQuestion(tc.qname, tc.qtype)
				if tc.qclass != 0 {
					m.Question[0].Qclass = tc.qclass
				}
				addr := tc.srv.UDPAddr().String()
				if network == "tcp" {
					addr = tc.srv.TCPAddr().String()
				}
				r := exchange(t, network, addr, m)
				if r.Rcode != tc.rcode {
					t.Errorf("%s: rcode %s, want %s", network, mdns.RcodeToString[r.Rcode], mdns.RcodeToString[tc.rcode])
				}
				if got := answers(r); !slices.Equal(got, tc.want) {
					t.Errorf("%s: answers %v, want %v", network, got, tc.want)
				}
				if r.Id != m.Id || !r.Response {
					t.Errorf("%s: reply id %d response=%v, want id %d", network, r.Id, r.Response, m.Id)
				}
			}
		})
	}
}

func TestResponderDropsMalformed(t *testing.T) {
	s := responder(t, false, nil)
	valid := new(mdns.Msg)
	valid.SetQuestion("good.test.", mdns.TypeA)
	packed, err := valid.Pack()
	if err != nil {
		t.Fatal(err)
	}
	twoQ := valid.Copy()
	twoQ.Question = append(twoQ.Question, twoQ.Question[0])
	twoQPacked, _ := twoQ.Pack()
	resp := valid.Copy()
	resp.Response = true
	respPacked, _ := resp.Pack()

	tests := []struct {
		name string
		pkt  []byte
	}{
		{"garbage", []byte("not a dns message at all")},
		{"short header", packed[:7]},
		{"truncated question", packed[:len(packed)-3]},
		{"two questions", twoQPacked},
		{"a response", respPacked},
	}
	conn, err := net.Dial("udp", s.UDPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 1500)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := conn.Write(tc.pkt); err != nil {
				t.Fatal(err)
			}
			conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
			if n, err := conn.Read(buf); err == nil {
				t.Fatalf("got a %d-byte reply to a malformed query", n)
			}
		})
	}
	// The responder is still alive and answers the valid query on the same socket.
	if _, err := conn.Write(packed); err != nil {
		t.Fatal(err)
	}
	conn.SetReadDeadline(time.Now().Add(time.Minute))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("valid query after junk: %v", err)
	}
	var r mdns.Msg
	if err := r.Unpack(buf[:n]); err != nil || r.Rcode != mdns.RcodeSuccess || len(r.Answer) != 1 {
		t.Fatalf("valid query after junk: %v rcode=%d answers=%d", err, r.Rcode, len(r.Answer))
	}
}

func TestResponderNotImplementedOpcode(t *testing.T) {
	s := responder(t, false, nil)
	m := new(mdns.Msg)
	m.SetUpdate("good.test.")
	r := exchange(t, "udp", s.UDPAddr().String(), m)
	if r.Rcode != mdns.RcodeNotImplemented {
		t.Fatalf("UPDATE: rcode %s, want NOTIMP", mdns.RcodeToString[r.Rcode])
	}
}

func TestResponderReportsQueries(t *testing.T) {
	rec := &recorder{}
	s := responder(t, false, rec)
	for _, name := range []string{"good.test.", "unlisted.test."} {
		m := new(mdns.Msg)
		m.SetQuestion(name, mdns.TypeA)
		exchange(t, "udp", s.UDPAddr().String(), m)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	want := []Query{
		{Name: "good.test", Type: "A", Allowed: true, Rcode: "NOERROR", Answers: 1},
		{Name: "unlisted.test", Type: "A", Allowed: false, Rcode: "NXDOMAIN"},
	}
	if !slices.Equal(rec.qs, want) {
		t.Fatalf("queries %+v, want %+v", rec.qs, want)
	}
}

func TestListenErrors(t *testing.T) {
	if _, err := Listen(Config{Addr: "127.0.0.1:0"}); err == nil {
		t.Error("Listen without Resolve succeeded")
	}
	s := responder(t, false, nil)
	if _, err := Listen(Config{Addr: s.UDPAddr().String(), Resolve: func(context.Context, string) ([]netip.Addr, error) { return nil, nil }}); err == nil {
		t.Error("second Listen on a bound address succeeded")
	}
}

// TestResponderTCPBounds holds the TCP connection limit with half-sent
// queries, checks that one more connection is closed at once, that a query
// trickled in slower than ReadTimeout allows is cut off, and that a freed
// slot answers again.
func TestResponderTCPBounds(t *testing.T) {
	p, err := proxy.New(proxy.Options{Hosts: map[string][]netip.Addr{"good.test": {netip.MustParseAddr("93.184.215.10")}}}, proxy.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	l, _ := allow.Parse([]string{"good.test"})
	// A read timeout far longer than the test, so only the cap can close the
	// extra connection; the trickle test gets its own responder.
	s, err := Listen(Config{Addr: "127.0.0.1:0", Allowed: HostAllowed(l), Resolve: p.Resolve, MaxTCPConns: 2, ReadTimeout: 10 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	addr := s.TCPAddr().String()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var held []net.Conn
	for range 2 {
		c := dial()
		// The length of a 64 KiB query, and not a byte of it.
		c.Write([]byte{0xff, 0xff})
		held = append(held, c)
	}
	// Accepts are first come, first served: the third connection is the extra one.
	extra := dial()
	extra.Write([]byte{0xff, 0xff})
	extra.SetReadDeadline(time.Now().Add(30 * time.Second))
	if n, err := extra.Read(make([]byte, 1)); err == nil || isTimeout(err) {
		t.Fatalf("connection beyond MaxTCPConns stayed open: read %d, %v", n, err)
	}
	held[0].Close()
	m := new(mdns.Msg)
	m.SetQuestion("good.test.", mdns.TypeA)
	if !eventually.Within(10*time.Second, func() bool {
		c := &mdns.Client{Net: "tcp", Timeout: 3 * time.Second}
		var r *mdns.Msg
		r, _, err = c.Exchange(m, addr)
		return err == nil && r.Rcode == mdns.RcodeSuccess
	}) {
		t.Fatalf("freed slot never answered: %v", err)
	}

	slow, err := Listen(Config{Addr: "127.0.0.1:0", Allowed: HostAllowed(l), Resolve: p.Resolve, ReadTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	c, err := net.Dial("tcp", slow.TCPAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0xff, 0xff})
	sent := 0
	for ; sent < 3000; sent++ {
		if _, err := c.Write([]byte{0}); err != nil {
			break
		}
		time.Sleep(10 * time.Millisecond) // a trickle, one byte each 10 ms, is the attack
	}
	if sent == 3000 {
		t.Fatal("a query trickled a byte at a time was read for 30 s")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
