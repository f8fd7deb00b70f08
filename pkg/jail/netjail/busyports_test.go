package netjail

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// TestPrepareTapWithBusyHostPorts sets up a tap-mode run while other programs
// hold the guest's ports on every address, then reads the run's rules back from
// the kernel: the guest's fixed ports are rewritten to the run's own listeners,
// which are what the input chain accepts.
func TestPrepareTapWithBusyHostPorts(t *testing.T) {
	requireNetAdmin(t)
	nettest.HoldGuestPorts(t)
	r, err := Prepare(context.Background(), Options{Pool: testPool, Mode: jail.NetTap, RunsDir: t.TempDir(), UID: -1, GID: -1})
	if err != nil {
		t.Fatalf("prepare with the guest's ports busy on the host: %v", err)
	}
	defer r.Close()
	l := r.Link
	if l.ProxyPort != DefaultProxyPort || l.DNSPort != DNSPort || r.Net.ProxyURL != "http://"+l.Host.String()+":3128" {
		t.Errorf("guest view %s, dns %d: want the fixed ports", r.Net.ProxyURL, l.DNSPort)
	}
	for _, p := range []uint16{l.Listen.Proxy, l.Listen.Transparent, l.Listen.DNSUDP, l.Listen.DNSTCP} {
		if p == 0 || p == 3128 || p == 3129 || p == 53 {
			t.Errorf("listeners %+v: want ephemeral ports", l.Listen)
		}
	}

	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	table := &nftables.Table{Name: l.Table, Family: nftables.TableFamilyINet}
	pre, err := c.GetRules(table, &nftables.Chain{Name: chainPrerouting, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range []struct {
		proto    byte
		from, to uint16
	}{
		{unix.IPPROTO_TCP, 3128, l.Listen.Proxy},
		{unix.IPPROTO_UDP, 53, l.Listen.DNSUDP},
		{unix.IPPROTO_TCP, 53, l.Listen.DNSTCP},
		{unix.IPPROTO_TCP, 80, l.Listen.Transparent},
		{unix.IPPROTO_TCP, 443, l.Listen.Transparent},
	} {
		if !hasRule(pre, m.proto, be16(m.from), be16(m.to), isDNAT) {
			t.Errorf("prerouting: no DNAT of proto %d port %d to %d", m.proto, m.from, m.to)
		}
	}
	in, err := c.GetRules(table, &nftables.Chain{Name: chainGuestIn, Table: table})
	if err != nil {
		t.Fatal(err)
	}
	// The listeners accept only rewritten connections: ct status has the DNAT bit.
	dnatBit := make([]byte, 4)
	binary.NativeEndian.PutUint32(dnatBit, ipsDstNAT)
	for _, m := range []struct {
		proto  byte
		listen uint16
	}{
		{unix.IPPROTO_TCP, l.Listen.Proxy},
		{unix.IPPROTO_UDP, l.Listen.DNSUDP},
		{unix.IPPROTO_TCP, l.Listen.DNSTCP},
		{unix.IPPROTO_TCP, l.Listen.Transparent},
	} {
		if !hasRule(in, m.proto, be16(m.listen), dnatBit, isAccept) {
			t.Errorf("guest_in: no accept of rewritten proto %d to port %d", m.proto, m.listen)
		}
	}
}

func isDNAT(e expr.Any) bool {
	n, ok := e.(*expr.NAT)
	return ok && n.Type == expr.NATTypeDestNAT
}

func isAccept(e expr.Any) bool {
	v, ok := e.(*expr.Verdict)
	return ok && v.Kind == expr.VerdictAccept
}

// hasRule reports whether a rule matches L4 protocol proto, compares (or loads)
// both byte strings a and b (b may be a DNAT target or a ct status mask), and ends in an expression end accepts.
func hasRule(rules []*nftables.Rule, proto byte, a, b []byte, end func(expr.Any) bool) bool {
	for _, r := range rules {
		var gotProto, gotA, gotB, gotEnd bool
		for _, e := range r.Exprs {
			switch e := e.(type) {
			case *expr.Cmp:
				gotProto = gotProto || bytes.Equal(e.Data, []byte{proto})
				gotA = gotA || bytes.Equal(e.Data, a)
				gotB = gotB || bytes.Equal(e.Data, b)
			case *expr.Immediate:
				gotB = gotB || bytes.Equal(e.Data, b)
			case *expr.Bitwise:
				gotB = gotB || bytes.Equal(e.Mask, b)
			}
			gotEnd = gotEnd || end(e)
		}
		if gotProto && gotA && gotB && gotEnd {
			return true
		}
	}
	return false
}
