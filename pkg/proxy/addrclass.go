package proxy

import (
	"fmt"
	"net/netip"
)

// AddrError is an address the destination guard refused: which address, what kind of
// address it is, and how an operator opens it. It wraps ErrPrivateAddress. A resolver
// that answers with a reserved range (a lab DNS, a split-horizon setup) then reads as
// what it is rather than as a missing allowlist entry.
type AddrError struct {
	Addr netip.Addr
	// Class names the kind of address, e.g. "a documentation address (TEST-NET-3, 203.0.113.0/24)".
	Class string
	// Literal: the client named the address itself; AllowCIDRs never open a literal.
	Literal bool
	// Tenant: the client's list is a tenant's (Options.TenantLists), so only
	// the operator's AllowCIDRs open the literal.
	Tenant bool
}

func (e *AddrError) Error() string {
	return fmt.Sprintf("%v: %s is %s", ErrPrivateAddress, e.Addr, e.Class)
}

func (e *AddrError) Unwrap() error { return ErrPrivateAddress }

// Prefix is the single-address range that opens exactly this address.
func (e *AddrError) Prefix() netip.Prefix {
	return netip.PrefixFrom(e.Addr, e.Addr.BitLen())
}

// Fix is the operator's way to let the address through: for a name, an allowed range
// naming exactly it (crackbox run --allow-cidr, or allow_cidrs in the proxy's config);
// for an IP literal, an allowlist entry naming exactly it.
func (e *AddrError) Fix() string {
	if e.Literal && e.Tenant {
		return fmt.Sprintf("the operator's allow_cidrs = [%q] in the [proxy] of arizuko.toml (a tenant's allowlist entry never opens it)", e.Prefix().String())
	}
	if e.Literal {
		return fmt.Sprintf("an allowlist entry naming exactly %s (--allow %s)", e.Addr, e.Addr)
	}
	return fmt.Sprintf("--allow-cidr %s (crackbox run) or allow_cidrs = [%q] (the [proxy] of crackbox.toml or arizuko.toml)", e.Prefix(), e.Prefix().String())
}

// addrClass pairs a refused range with how the refusal names it.
type addrClass struct {
	prefix netip.Prefix
	class  string
}

// blockedClasses are destinations a sandbox must not reach through an allowlisted name:
// loopback, private, shared, link-local (cloud metadata), multicast, reserved and the
// other special-purpose ranges. Narrower ranges come before the ranges holding them.
var blockedClasses = func() []addrClass {
	var out []addrClass
	for _, c := range []struct{ prefix, class string }{
		{"0.0.0.0/8", "a \"this network\" address (0.0.0.0/8)"},
		{"10.0.0.0/8", "a private address (RFC 1918, 10.0.0.0/8)"},
		{"100.64.0.0/10", "a CGNAT shared address (RFC 6598, 100.64.0.0/10)"},
		{"127.0.0.0/8", "a loopback address (127.0.0.0/8)"},
		{"169.254.0.0/16", "a link-local address (169.254.0.0/16, where cloud metadata lives)"},
		{"172.16.0.0/12", "a private address (RFC 1918, 172.16.0.0/12)"},
		{"192.0.0.0/24", "an IETF protocol assignment (192.0.0.0/24)"},
		{"192.0.2.0/24", "a documentation address (TEST-NET-1, 192.0.2.0/24)"},
		{"192.88.99.0/24", "a 6to4 relay anycast address (192.88.99.0/24)"},
		{"192.168.0.0/16", "a private address (RFC 1918, 192.168.0.0/16)"},
		{"198.18.0.0/15", "a benchmarking address (RFC 2544, 198.18.0.0/15)"},
		{"198.51.100.0/24", "a documentation address (TEST-NET-2, 198.51.100.0/24)"},
		{"203.0.113.0/24", "a documentation address (TEST-NET-3, 203.0.113.0/24)"},
		{"224.0.0.0/4", "a multicast address (224.0.0.0/4)"},
		{"240.0.0.0/4", "a reserved address (240.0.0.0/4, with the broadcast address)"},
		{"::/128", "the unspecified address (::)"},
		{"::1/128", "the loopback address (::1)"},
		{"fc00::/7", "a unique local address (ULA, fc00::/7)"},
		{"fe80::/10", "a link-local address (fe80::/10)"},
		{"fec0::/10", "a site-local address (deprecated, fec0::/10)"},
		{"ff00::/8", "a multicast address (ff00::/8)"},
		{"100::/64", "a discard-only address (100::/64)"},
		{"2001:db8::/32", "a documentation address (2001:db8::/32)"},
		{"3fff::/20", "a documentation address (RFC 9637, 3fff::/20)"},
		// Teredo tunnels to an IPv4 endpoint the guard cannot judge.
		{"2001::/32", "a Teredo address (2001::/32)"},
		{"2001::/23", "an IETF protocol assignment (benchmarking, ORCHID; 2001::/23)"},
		{"5f00::/16", "an SRv6 segment identifier (5f00::/16)"},
		// Local-use NAT64 translates into the operator's own networks.
		{"64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48)"},
		// IPv4-compatible, deprecated; reaches the embedded IPv4 on some stacks.
		{"::/96", "an IPv4-compatible address (deprecated, ::/96)"},
	} {
		out = append(out, addrClass{netip.MustParsePrefix(c.prefix), c.class})
	}
	return out
}()

// blockedClass names the special-purpose range holding a, or "" when none does.
func blockedClass(a netip.Addr) string {
	for _, c := range blockedClasses {
		if c.prefix.Contains(a) {
			return c.class
		}
	}
	return ""
}

// ownClass names an address of the proxy host itself.
func ownClass(a netip.Addr) string {
	switch {
	case a.IsUnspecified():
		return "the unspecified address, which reaches the proxy host itself"
	case a.IsLoopback():
		return "a loopback address of the proxy host"
	}
	return "an address of the proxy host itself"
}
