package proxy

import (
	"fmt"
	"net/netip"
)

// refused returns an error wrapping ErrPrivateAddress when a:port is one of
// cfg's refused listeners: the same address, or any address of the proxy
// host (loopback included) for a listener on the unspecified address.
func (p *Proxy) refused(cfg *config, a netip.Addr, port int) error {
	a = a.WithZone("").Unmap()
	for _, r := range cfg.refuse {
		if int(r.Port()) != port {
			continue
		}
		ra := r.Addr().Unmap()
		own := a.IsLoopback() || a.IsUnspecified() || p.ifaces.has(a)
		if ra == a || ra.IsUnspecified() && own || ra.IsLoopback() && a.IsLoopback() {
			return fmt.Errorf("%w: %s:%d is a listener of the host's own daemon", ErrPrivateAddress, a, port)
		}
	}
	return nil
}

// withoutRefused drops the refused listeners from the addresses of host,
// failing when none is left.
func (p *Proxy) withoutRefused(cfg *config, host string, addrs []netip.Addr, port int) ([]netip.Addr, error) {
	if len(cfg.refuse) == 0 {
		return addrs, nil
	}
	out := make([]netip.Addr, 0, len(addrs))
	var first error
	for _, a := range addrs {
		if err := p.refused(cfg, a, port); err != nil {
			if first == nil {
				first = err
			}
			continue
		}
		out = append(out, a)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", host, first)
	}
	return out, nil
}

// SpecialPurpose reports whether any address of pfx lies in a range the
// destination guard refuses by default (loopback, private, CGNAT,
// link-local, multicast, reserved, documentation): an allowlist entry for
// such a prefix reaches the operator's networks, not the internet.
func SpecialPurpose(pfx netip.Prefix) bool {
	pfx = pfx.Masked()
	for _, b := range blockedClasses {
		if b.prefix.Overlaps(pfx) {
			return true
		}
	}
	if v4, ok := embeddedV4(pfx.Addr()); ok {
		return SpecialPurpose(netip.PrefixFrom(v4, 32))
	}
	return false
}
