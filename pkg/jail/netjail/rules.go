package netjail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"
)

// Chain names inside a run's table.
const (
	chainPrerouting = "prerouting"
	chainInput      = "input"
	chainForward    = "forward"
	chainOutput     = "output"
	chainGuestIn    = "guest_in"
	chainGuestOut   = "guest_out"
)

// Comments on the drop rules; tests and `nft list table` readers find
// counters by them.
const (
	DropIPv6    = "drop:ipv6"
	DropSpoof   = "drop:spoofed-source"
	DropNotHost = "drop:not-host-side"
	DropOther   = "drop:other"
	DropForward = "drop:forward-from-guest"
	DropToGuest = "drop:forward-to-guest"
	DropOutput  = "drop:host-initiated"
)

// ipsDstNAT is IPS_DST_NAT from linux/netfilter/nf_conntrack_common.h.
const ipsDstNAT = 1 << 5

// Rules is the static rule set of one jail link. Iface is the host side of
// the link (the tap, or a veth in tests); Host and Guest are its /30's .1
// and .2. From Iface only these pass: TCP to Host:ProxyPort and DNS (UDP and
// TCP) to Host:DNSPort, each rewritten to its listener; TCP to any address on
// port 80 or 443, rewritten to the transparent listener; ICMP echo to Host
// and ICMP errors for flows the host answered. A listener is reachable only
// through its rewrite, never dialed directly. Everything else from Iface,
// anything forwarded to or from it, and host-initiated traffic into it is
// counted and dropped.
type Rules struct {
	Table       string
	Iface       string
	Host, Guest netip.Addr
	ProxyPort   uint16    // the guest's view
	DNSPort     uint16    // the guest's view
	Listen      Listeners // the host's listeners on Host
	Owner       string    // tag stored as the comment of the input jump rule
}

func (r Rules) validate() error {
	switch {
	case !strings.HasPrefix(r.Table, tablePrefix):
		return fmt.Errorf("netjail: table %q must start with %q", r.Table, tablePrefix)
	case r.Iface == "" || len(r.Iface) > unix.IFNAMSIZ-1:
		return fmt.Errorf("netjail: interface name %q: want 1..%d characters", r.Iface, unix.IFNAMSIZ-1)
	case !r.Host.Is4() || !r.Guest.Is4():
		return fmt.Errorf("netjail: host %s and guest %s must be IPv4 addresses", r.Host, r.Guest)
	case r.ProxyPort == 0 || r.Listen.Transparent == 0 || r.DNSPort == 0:
		return errors.New("netjail: proxy, transparent and DNS ports must be set")
	}
	return nil
}

// Install creates the table with all its chains and rules in one atomic
// batch. It fails if a table of that name already exists.
func (r Rules) Install() error {
	if err := r.validate(); err != nil {
		return err
	}
	lis := r.Listen.withDefaults(r.ProxyPort, r.DNSPort)
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netjail: nftables: %w", err)
	}
	b := batch{c: c, t: c.CreateTable(&nftables.Table{Name: r.Table, Family: nftables.TableFamilyINet})}
	pre := b.base(chainPrerouting, nftables.ChainHookPrerouting, nftables.ChainPriorityNATDest, nftables.ChainTypeNAT)
	in := b.base(chainInput, nftables.ChainHookInput, nftables.ChainPriorityFilter, nftables.ChainTypeFilter)
	fwd := b.base(chainForward, nftables.ChainHookForward, nftables.ChainPriorityFilter, nftables.ChainTypeFilter)
	out := b.base(chainOutput, nftables.ChainHookOutput, nftables.ChainPriorityFilter, nftables.ChainTypeFilter)
	gin := c.AddChain(&nftables.Chain{Name: chainGuestIn, Table: b.t})
	gout := c.AddChain(&nftables.Chain{Name: chainGuestOut, Table: b.t})

	r.dnatRules(b, pre, lis)
	b.add(in, r.Owner, cat(iif(r.Iface), verdict(expr.VerdictJump, chainGuestIn))...)
	r.guestInRules(b, gin, lis)
	b.add(fwd, DropForward, cat(iif(r.Iface), drop())...)
	b.add(fwd, DropToGuest, cat(oif(r.Iface), drop())...)
	b.add(out, "", cat(oif(r.Iface), verdict(expr.VerdictJump, chainGuestOut))...)
	b.add(gout, "", cat(ctBits(unix.NFT_CT_STATE, expr.CtStateBitESTABLISHED|expr.CtStateBitRELATED), verdict(expr.VerdictAccept, ""))...)
	b.add(gout, DropOutput, drop()...)

	if err := c.Flush(); err != nil {
		return fmt.Errorf("netjail: install nft table %s: %w", r.Table, err)
	}
	return nil
}

// batch queues chains and rules of one table for a single atomic flush.
type batch struct {
	c *nftables.Conn
	t *nftables.Table
}

// base adds a base chain on hook with an accept policy; the jump rules decide.
func (b batch) base(name string, hook *nftables.ChainHook, prio *nftables.ChainPriority, typ nftables.ChainType) *nftables.Chain {
	accept := nftables.ChainPolicyAccept
	return b.c.AddChain(&nftables.Chain{Name: name, Table: b.t, Hooknum: hook, Priority: prio, Type: typ, Policy: &accept})
}

// add appends a rule to ch, with comment (counted drops are found by it) if any.
func (b batch) add(ch *nftables.Chain, comment string, exprs ...expr.Any) {
	rule := &nftables.Rule{Table: b.t, Chain: ch, Exprs: exprs}
	if comment != "" {
		rule.UserData = userdata.AppendString(nil, userdata.TypeComment, comment)
	}
	b.c.AddRule(rule)
}

// dnatRules DNAT web traffic to any address onto the transparent listener, and the
// guest's fixed proxy and DNS ports onto wherever those listeners are.
func (r Rules) dnatRules(b batch, pre *nftables.Chain, lis Listeners) {
	host := r.Host.AsSlice()
	for _, port := range []uint16{80, 443} {
		b.add(pre, "", cat(iif(r.Iface), nfproto(unix.NFPROTO_IPV4), l4(unix.IPPROTO_TCP), dport(port),
			dnatTo(host, lis.Transparent))...)
	}
	services := []struct {
		proto    byte
		from, to uint16
	}{
		{unix.IPPROTO_TCP, r.ProxyPort, lis.Proxy},
		{unix.IPPROTO_UDP, r.DNSPort, lis.DNSUDP},
		{unix.IPPROTO_TCP, r.DNSPort, lis.DNSTCP},
	}
	for _, m := range services {
		if m.from != m.to {
			b.add(pre, "", cat(iif(r.Iface), nfproto(unix.NFPROTO_IPV4), ip4(16, expr.CmpOpEq, host),
				l4(m.proto), dport(m.from), dnatTo(host, m.to))...)
		}
	}
}

// guestInRules is what the guest may send to the host: its own IPv4 source to the
// host address, on the proxy, transparent and DNS listeners and ping; the rest drops.
func (r Rules) guestInRules(b batch, gin *nftables.Chain, lis Listeners) {
	b.add(gin, DropIPv6, cat(nfproto(unix.NFPROTO_IPV6), drop())...)
	b.add(gin, DropSpoof, cat(ip4(12, expr.CmpOpNeq, r.Guest.AsSlice()), drop())...)
	b.add(gin, DropNotHost, cat(ip4(16, expr.CmpOpNeq, r.Host.AsSlice()), drop())...)
	// A rewritten listener takes only connections the prerouting chain
	// rewrote, so the guest reaches it at its fixed port alone. Only those
	// rewrites reach the transparent port, so the guest cannot skip the
	// 80/443 restriction.
	rewritten := ctBits(unix.NFT_CT_STATUS, ipsDstNAT)
	allowVia := func(proto byte, from, to uint16) {
		match := cat(l4(proto), dport(to))
		if from != to {
			match = cat(match, rewritten)
		}
		b.add(gin, "", cat(match, verdict(expr.VerdictAccept, ""))...)
	}
	allowVia(unix.IPPROTO_TCP, r.ProxyPort, lis.Proxy)
	b.add(gin, "", cat(l4(unix.IPPROTO_TCP), dport(lis.Transparent), rewritten, verdict(expr.VerdictAccept, ""))...)
	allowVia(unix.IPPROTO_UDP, r.DNSPort, lis.DNSUDP)
	allowVia(unix.IPPROTO_TCP, r.DNSPort, lis.DNSTCP)
	b.add(gin, "", cat(l4(unix.IPPROTO_ICMP), icmpType(8), verdict(expr.VerdictAccept, ""))...)
	b.add(gin, "", cat(l4(unix.IPPROTO_ICMP), ctBits(unix.NFT_CT_STATE, expr.CtStateBitRELATED), verdict(expr.VerdictAccept, ""))...)
	b.add(gin, DropOther, drop()...)
}

// RemoveTable deletes a table created by Install; a missing table is not an error.
func RemoveTable(name string) error {
	if name == "" {
		return nil
	}
	c, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netjail: nftables: %w", err)
	}
	t, err := c.ListTableOfFamily(name, nftables.TableFamilyINet)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("netjail: find nft table %s: %w", name, err)
	}
	c.DelTable(t)
	if err := c.Flush(); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("netjail: delete nft table %s: %w", name, err)
	}
	return nil
}

func cat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func ifname(n string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, n)
	return b
}

func iif(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

func oif(name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
	}
}

func nfproto(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyNFPROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

func l4(p byte) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{p}},
	}
}

// ip4 compares the IPv4 source (offset 12) or destination (offset 16).
func ip4(offset uint32, op expr.CmpOp, a []byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: offset, Len: 4},
		&expr.Cmp{Op: op, Register: 1, Data: a},
	}
}

func dport(p uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: be16(p)},
	}
}

// dnatTo rewrites the destination to addr:port.
func dnatTo(addr []byte, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Immediate{Register: 1, Data: addr},
		&expr.Immediate{Register: 2, Data: be16(port)},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: unix.NFPROTO_IPV4, RegAddrMin: 1, RegProtoMin: 2, Specified: true},
	}
}

func icmpType(t byte) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{t}},
	}
}

// ctBits matches when any of bits is set in the conntrack key (state or status).
func ctBits(key uint32, bits uint32) []expr.Any {
	mask := make([]byte, 4)
	binary.NativeEndian.PutUint32(mask, bits)
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKey(key)},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: mask, Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

func drop() []expr.Any {
	return []expr.Any{&expr.Counter{}, &expr.Verdict{Kind: expr.VerdictDrop}}
}

func verdict(k expr.VerdictKind, chain string) []expr.Any {
	return []expr.Any{&expr.Verdict{Kind: k, Chain: chain}}
}

func be16(v uint16) []byte {
	return binary.BigEndian.AppendUint16(nil, v)
}
