package config

import (
	"net/netip"
)

// The keys whose values are addresses are parsed here and nowhere else: Validate
// checks them through these, and callers take the typed values from them.

// AddrPoolPrefix is run.addr_pool as a prefix; an empty pool is the zero prefix
// (netjail's default).
func (r Run) AddrPoolPrefix() (netip.Prefix, error) {
	if r.AddrPool == "" {
		return netip.Prefix{}, nil
	}
	pfx, err := netip.ParsePrefix(r.AddrPool)
	if err != nil || !pfx.Addr().Is4() || pfx.Bits() > 30 {
		return netip.Prefix{}, invalid("run.addr_pool", "%q: write an IPv4 CIDR of /30 or wider, like \"10.213.0.0/16\"", r.AddrPool)
	}
	return pfx, nil
}

// CIDRs is proxy.allow_cidrs as prefixes.
func (p Proxy) CIDRs() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range p.AllowCIDRs {
		pfx, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, invalid("proxy.allow_cidrs", "%q is not a CIDR: write it like \"10.0.0.0/8\"", s)
		}
		out = append(out, pfx)
	}
	return out, nil
}

// HostAddrs is proxy.hosts with its addresses parsed.
func (p Proxy) HostAddrs() (map[string][]netip.Addr, error) {
	out := make(map[string][]netip.Addr, len(p.Hosts))
	for name, addrs := range p.Hosts {
		for _, a := range addrs {
			ip, err := netip.ParseAddr(a)
			if err != nil {
				return nil, invalid("proxy.hosts", "%s = %q is not an IP address", name, a)
			}
			out[name] = append(out[name], ip)
		}
	}
	return out, nil
}
