package proxy

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/dest"
)

// Resolution errors callers branch on; pkg/proxy/dest owns them.
var (
	ErrPrivateAddress = dest.ErrPrivateAddress
	ErrNoAddress      = dest.ErrNoAddress
)

// newResolver returns the system configuration for "" (/etc/hosts,
// resolv.conf nameservers, nsswitch order) or a resolver that sends every
// query to addr. Both are Go's own resolver: it treats the absolute names
// resolve asks for ("name.") as /etc/hosts entries, which glibc does not.
func newResolver(addr string) (*net.Resolver, error) {
	if addr == "" {
		return &net.Resolver{PreferGo: true}, nil
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return nil, fmt.Errorf("proxy: resolver %q: want ip:port, e.g. 1.1.1.1:53: %w", addr, err)
	}
	server := ap.String()
	return &net.Resolver{
		PreferGo: true,
		Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, server)
		},
	}, nil
}

// NAT64 (well-known and local-use) and 6to4 embed an IPv4 address that the
// guard must judge too: a translator forwards to it.
var (
	nat64Prefix      = netip.MustParsePrefix("64:ff9b::/96")
	nat64LocalPrefix = netip.MustParsePrefix("64:ff9b:1::/48")
	sixToFour        = netip.MustParsePrefix("2002::/16")
)

// ifaceCache holds the proxy host's own addresses and the subnets they sit
// on; interfaces change rarely, so a short TTL keeps the guard cheap without
// going stale for long.
type ifaceCache struct {
	mu     sync.Mutex
	at     time.Time
	loaded bool
	addrs  []netip.Addr
	nets   []netip.Prefix
}

// has reports whether a is an address of the proxy host. A miss refreshes a
// cache older than a second, so an interface added moments ago (a new
// guest's tap gateway) is seen before that guest can aim at it.
func (c *ifaceCache) has(a netip.Addr) bool {
	if addrs, _ := c.get(10 * time.Second); slices.Contains(addrs, a) {
		return true
	}
	addrs, _ := c.get(time.Second)
	return slices.Contains(addrs, a)
}

// onLink returns the directly connected subnet of the proxy host that holds
// a (the host's LAN, a VPN, a bridge), refreshed like has.
func (c *ifaceCache) onLink(a netip.Addr) (netip.Prefix, bool) {
	find := func(nets []netip.Prefix) (netip.Prefix, bool) {
		for _, p := range nets {
			if p.Contains(a) {
				return p, true
			}
		}
		return netip.Prefix{}, false
	}
	if _, nets := c.get(10 * time.Second); nets != nil {
		if p, ok := find(nets); ok {
			return p, true
		}
	}
	_, nets := c.get(time.Second)
	return find(nets)
}

func (c *ifaceCache) get(ttl time.Duration) ([]netip.Addr, []netip.Prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded && time.Since(c.at) < ttl {
		return c.addrs, c.nets
	}
	var addrs []netip.Addr
	var nets []netip.Prefix
	if ias, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ias {
			n, ok := ia.(*net.IPNet)
			if !ok {
				continue
			}
			a, ok := netip.AddrFromSlice(n.IP)
			if !ok {
				continue
			}
			a = a.Unmap()
			addrs = append(addrs, a)
			ones, _ := n.Mask.Size()
			if a.Is4() && len(n.Mask) == net.IPv6len {
				ones -= 96
			}
			if pfx, err := a.Prefix(ones); err == nil {
				nets = append(nets, pfx)
			}
		}
	}
	c.addrs, c.nets, c.at, c.loaded = addrs, nets, time.Now(), true
	return addrs, nets
}

// covered reports whether one of the exempt ranges covers a.
func covered(exempt []netip.Prefix, a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range exempt {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// ownAddrAllowed reports whether an exempt range opens an address of the
// proxy host itself. The rule: a loopback address is open when a range
// covers it and lies entirely inside loopback (127.0.0.0/8 or narrower,
// ::1/128), so a test or demo upstream on 127.x works; any other host
// address (a tap gateway, the LAN address, 0.0.0.0) is open only through an
// entry naming exactly that address (/32 or /128). A broad range such as
// 10.0.0.0/8 therefore never opens the host's own services to a guest.
func ownAddrAllowed(exempt []netip.Prefix, a netip.Addr) bool {
	for _, p := range exempt {
		if !p.Contains(a) {
			continue
		}
		if p.IsSingleIP() {
			return true
		}
		if a.IsLoopback() && p.Addr().IsLoopback() && p.Bits() >= loopbackBits(a) {
			return true
		}
	}
	return false
}

func loopbackBits(a netip.Addr) int {
	if a.Is4() {
		return 8
	}
	return 128
}

// guard returns nil if a may be dialed. exempt are the ranges the operator
// opened for this destination: AllowCIDRs for the addresses of a name, the
// client's address entries for an IP literal. An address of the proxy host
// (an interface address, any loopback or the unspecified address) passes
// only under ownAddrAllowed; any other address passes when an exempt range
// covers it, or when it is outside every blocked range and every subnet the
// proxy host is directly connected to (its LAN is as private as RFC 1918).
func (p *Proxy) guard(exempt []netip.Prefix, a netip.Addr) error {
	a = a.WithZone("").Unmap()
	if !a.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrPrivateAddress)
	}
	if a.IsLoopback() || a.IsUnspecified() || p.ifaces.has(a) {
		if ownAddrAllowed(exempt, a) {
			return nil
		}
		return &AddrError{Addr: a, Class: ownClass(a)}
	}
	if v4, ok := embeddedV4(a); ok {
		// A translator forwards to the embedded IPv4, so it must pass on its
		// own, even when a range covers the IPv6 form.
		if err := p.guard(exempt, v4); err != nil {
			return fmt.Errorf("%w (embedded in %s)", err, a)
		}
	}
	if covered(exempt, a) {
		return nil
	}
	if class := blockedClass(a); class != "" {
		return &AddrError{Addr: a, Class: class}
	}
	if v4, ok := embeddedV4(a); ok && blockedAddr(v4) {
		return &AddrError{Addr: a, Class: fmt.Sprintf("a translated address leading to %s, %s", v4, blockedClass(v4))}
	}
	if pfx, ok := p.ifaces.onLink(a); ok {
		return &AddrError{Addr: a, Class: fmt.Sprintf("an on-link address (%s, a subnet directly connected to the proxy host)", pfx)}
	}
	return nil
}

func blockedAddr(a netip.Addr) bool {
	if blockedClass(a) != "" {
		return true
	}
	if v4, ok := embeddedV4(a); ok {
		return blockedAddr(v4)
	}
	return false
}

// embeddedV4 returns the IPv4 address a NAT64 or 6to4 address leads to. The
// local-use NAT64 range is read with the /96 layout of the well-known one,
// the layout translators use for it in practice.
func embeddedV4(a netip.Addr) (netip.Addr, bool) {
	if !a.Is6() {
		return netip.Addr{}, false
	}
	b := a.As16()
	switch {
	case nat64Prefix.Contains(a), nat64LocalPrefix.Contains(a):
		return netip.AddrFrom4([4]byte(b[12:16])), true
	case sixToFour.Contains(a):
		return netip.AddrFrom4([4]byte(b[2:6])), true
	}
	return netip.Addr{}, false
}

// Resolve looks host up (static Hosts first, then the configured resolver)
// and returns the addresses the destination guard lets through, in resolver
// order. If every address is refused the error wraps ErrPrivateAddress. An IP
// literal is refused: only a client's allowlist can open one, and Resolve
// knows no client. The DNS responder of the network jail uses this so it
// never hands a sandbox an address the proxy would refuse.
func (p *Proxy) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return p.resolve(ctx, p.cfg.Load(), host)
}

func (p *Proxy) resolve(ctx context.Context, cfg *config, host string) ([]netip.Addr, error) {
	h, err := allow.NormalizeHost(host)
	if err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return nil, fmt.Errorf("%w: %s is an IP literal; only an allowlist entry naming it opens it", ErrPrivateAddress, a)
	}
	addrs, ok := cfg.hosts[h]
	if !ok {
		// The trailing dot makes the name absolute, so the host's resolv.conf
		// search domains never turn an allowlisted name into a local one.
		ips, err := cfg.resolver.LookupNetIP(ctx, "ip", h+".")
		if err != nil {
			return nil, fmt.Errorf("resolve %s: %w", h, err)
		}
		addrs = ips
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", h, ErrNoAddress)
	}
	out := make([]netip.Addr, 0, len(addrs))
	var firstErr error
	for _, a := range addrs {
		a = a.Unmap()
		if err := p.guard(cfg.cidrs, a); err != nil {
			if firstErr == nil {
				firstErr = err
			}
			continue
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("resolve %s: %w", h, firstErr)
	}
	return out, nil
}
