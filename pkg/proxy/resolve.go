package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/allow"
)

// Resolution errors callers branch on.
var (
	ErrPrivateAddress = errors.New("destination address not allowed")
	ErrNoAddress      = errors.New("host has no address")
)

// newResolver returns the system resolver for "" (so /etc/hosts and
// nsswitch apply) or a pure-Go resolver that sends every query to addr.
func newResolver(addr string) (*net.Resolver, error) {
	if addr == "" {
		return net.DefaultResolver, nil
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

// blockedPrefixes are destinations a sandbox must not reach through an
// allowlisted name: loopback, private, shared, link-local (cloud metadata),
// multicast, reserved and documentation-free special ranges.
var blockedPrefixes = func() []netip.Prefix {
	var out []netip.Prefix
	for _, s := range []string{
		"0.0.0.0/8",      // "this network", unspecified
		"10.0.0.0/8",     // RFC1918
		"100.64.0.0/10",  // CGNAT
		"127.0.0.0/8",    // loopback
		"169.254.0.0/16", // link-local, 169.254.169.254 metadata
		"172.16.0.0/12",  // RFC1918
		"192.0.0.0/24",   // IETF protocol assignments
		"192.168.0.0/16", // RFC1918
		"198.18.0.0/15",  // benchmarking
		"224.0.0.0/4",    // multicast
		"240.0.0.0/4",    // reserved, 255.255.255.255 broadcast
		"::/128",         // unspecified
		"::1/128",        // loopback
		"fc00::/7",       // ULA
		"fe80::/10",      // link-local
		"fec0::/10",      // deprecated site-local
		"ff00::/8",       // multicast
		"100::/64",       // discard
		"2001:db8::/32",  // documentation
	} {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}()

// nat64 and 6to4 embed an IPv4 address that the guard must judge too.
var (
	nat64Prefix = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour   = netip.MustParsePrefix("2002::/16")
)

// ifaceCache holds the proxy host's own addresses; interfaces change rarely,
// so a short TTL keeps the guard cheap without going stale for long.
type ifaceCache struct {
	mu    sync.Mutex
	at    time.Time
	addrs []netip.Addr
}

func (c *ifaceCache) get() []netip.Addr {
	c.mu.Lock()
	defer c.mu.Unlock()
	if time.Since(c.at) < 10*time.Second && c.addrs != nil {
		return c.addrs
	}
	var addrs []netip.Addr
	if ias, err := net.InterfaceAddrs(); err == nil {
		for _, ia := range ias {
			if n, ok := ia.(*net.IPNet); ok {
				if a, ok := netip.AddrFromSlice(n.IP); ok {
					addrs = append(addrs, a.Unmap())
				}
			}
		}
	}
	c.addrs, c.at = addrs, time.Now()
	return addrs
}

// allowedCIDR reports whether an operator range covers a.
func (cfg *config) allowedCIDR(a netip.Addr) bool {
	a = a.Unmap()
	for _, p := range cfg.cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// guard returns nil if a may be dialed: it is outside every blocked range
// and not one of the proxy host's own addresses, or an AllowCIDRs entry
// covers it.
func (p *Proxy) guard(cfg *config, a netip.Addr) error {
	a = a.WithZone("").Unmap()
	if cfg.allowedCIDR(a) {
		return nil
	}
	if !a.IsValid() {
		return fmt.Errorf("%w: invalid address", ErrPrivateAddress)
	}
	if blockedAddr(a) {
		return fmt.Errorf("%w: %s is in a private or special-purpose range", ErrPrivateAddress, a)
	}
	if slices.Contains(p.ifaces.get(), a) {
		return fmt.Errorf("%w: %s is an address of the proxy host", ErrPrivateAddress, a)
	}
	return nil
}

func blockedAddr(a netip.Addr) bool {
	for _, p := range blockedPrefixes {
		if p.Contains(a) {
			return true
		}
	}
	if a.Is6() && (nat64Prefix.Contains(a) || sixToFour.Contains(a)) {
		b := a.As16()
		var v4 [4]byte
		if nat64Prefix.Contains(a) {
			copy(v4[:], b[12:])
		} else {
			copy(v4[:], b[2:6])
		}
		return blockedAddr(netip.AddrFrom4(v4))
	}
	return false
}

// Resolve looks host up (static Hosts first, then the configured resolver)
// and returns the addresses the destination guard lets through, in resolver
// order. If every address is refused the error wraps ErrPrivateAddress. An IP
// literal is returned as is when an AllowCIDRs entry covers it and refused
// otherwise. The DNS responder of the network jail uses this so it never
// hands a sandbox an address the proxy would refuse.
func (p *Proxy) Resolve(ctx context.Context, host string) ([]netip.Addr, error) {
	return p.resolve(ctx, p.cfg.Load(), host)
}

func (p *Proxy) resolve(ctx context.Context, cfg *config, host string) ([]netip.Addr, error) {
	h, err := allow.NormalizeHost(host)
	if err != nil {
		return nil, err
	}
	if a, err := netip.ParseAddr(h); err == nil {
		if cfg.allowedCIDR(a) {
			return []netip.Addr{a.Unmap()}, nil
		}
		return nil, fmt.Errorf("%w: IP literal %s is not in an allowed CIDR", ErrPrivateAddress, a)
	}
	addrs, ok := cfg.hosts[h]
	if !ok {
		ips, err := cfg.resolver.LookupNetIP(ctx, "ip", h)
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
		if err := p.guard(cfg, a); err != nil {
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
