package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// verdict is the outcome of authorize: the addresses to dial, or the reason
// for refusing.
type verdict struct {
	host   string // normalized
	port   int
	addrs  []netip.Addr
	reason string // "" when allowed
	detail string
	// refused is the address the guard refused, for a blocked-private-address reason.
	refused *AddrError
}

// authorize decides host:port for client: allowlist first, then resolution
// and the destination guard. An IP literal needs an address entry of the
// client's allowlist covering it on that port; the guard then exempts the
// list's address entries, not AllowCIDRs, which only widen where allowed
// names may resolve to; with TenantLists it exempts AllowCIDRs alone, so a
// list the operator did not write never widens the guard.
func (p *Proxy) authorize(ctx context.Context, cfg *config, c Client, host string, port int) verdict {
	v := verdict{host: host, port: port}
	h, err := allow.NormalizeHost(host)
	if err != nil {
		v.reason, v.detail = ReasonAllowlist, err.Error()
		return v
	}
	v.host = h
	if a, err := netip.ParseAddr(h); err == nil {
		a = a.Unmap()
		if err := c.Allow.CheckWithPorts(a.String(), port, cfg.ports); err != nil {
			v.reason, v.detail = ReasonAllowlist, err.Error()
			if errors.Is(err, allow.ErrPortNotAllowed) {
				v.reason = ReasonPort
			}
			return v
		}
		exempt := c.Allow.Prefixes()
		if cfg.tenantLists {
			exempt = cfg.cidrs
		}
		if err := p.guard(exempt, a); err != nil {
			v.reason, v.detail = ReasonPrivateAddress, err.Error()
			if errors.As(err, &v.refused) {
				v.refused.Literal, v.refused.Tenant = true, cfg.tenantLists
				v.detail = refusedDetail(h, v.refused)
			}
			return v
		}
		if err := p.refused(cfg, a, port); err != nil {
			v.reason, v.detail = ReasonPrivateAddress, err.Error()
			return v
		}
		v.addrs = []netip.Addr{a}
		return v
	}
	if err := c.Allow.CheckWithPorts(h, port, cfg.ports); err != nil {
		v.reason, v.detail = ReasonAllowlist, err.Error()
		if errors.Is(err, allow.ErrPortNotAllowed) {
			v.reason = ReasonPort
		}
		return v
	}
	addrs, err := p.resolve(ctx, cfg, h)
	if err == nil {
		addrs, err = p.withoutRefused(cfg, h, addrs, port)
	}
	if err != nil {
		v.detail = err.Error()
		switch {
		case errors.Is(err, ErrPrivateAddress):
			v.reason = ReasonPrivateAddress
			if errors.As(err, &v.refused) {
				v.detail = refusedDetail(h, v.refused)
			}
		case isTimeout(err):
			v.reason = ReasonUpstreamTimeout
		default:
			v.reason = ReasonUpstreamError
		}
		return v
	}
	v.addrs = addrs
	return v
}

// refusedDetail says what was refused and why, for the refusal body: the name (or
// literal), the address, its class and the operator's fix.
func refusedDetail(host string, e *AddrError) string {
	if e.Literal {
		return fmt.Sprintf("%s is %s, which the proxy refuses unless %s", e.Addr, e.Class, e.Fix())
	}
	return fmt.Sprintf("%s is allowed, but it resolves only to addresses the proxy refuses; %s is %s. If that address is right, the operator opens it with %s", host, e.Addr, e.Class, e.Fix())
}

// note adds the refused address to a decision: the address, its class and the fix.
func (v verdict) note(d *Decision) {
	if v.refused == nil {
		return
	}
	d.IP, d.Class, d.Fix = v.refused.Addr.String(), v.refused.Class, v.refused.Fix()
}

// allowedByPolicy reports whether a reason still counts as an allowed decision
// (policy said yes, the network failed).
func allowedByPolicy(reason string) bool {
	return reason == "" || reason == ReasonUpstreamError || reason == ReasonUpstreamTimeout
}

// dial connects to the first reachable checked address. It never resolves:
// the addresses are exactly those the guard passed.
func (p *Proxy) dial(ctx context.Context, cfg *config, addrs []netip.Addr, port int) (net.Conn, netip.Addr, error) {
	var firstErr error
	for _, a := range addrs {
		start := time.Now()
		// No TCP keepalive: the tunnel idle timeout already ends silent
		// connections, and the socket options cost system calls per tunnel.
		d := net.Dialer{Timeout: cfg.dialTimeout, KeepAlive: -1}
		c, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(port)).String())
		p.metrics.dial.Observe(time.Since(start).Seconds())
		if err == nil {
			return c, a, nil
		}
		if firstErr == nil {
			firstErr = err
		}
		if ctx.Err() != nil {
			break
		}
	}
	if firstErr == nil {
		firstErr = fmt.Errorf("%w: no address to dial", ErrNoAddress)
	}
	return nil, netip.Addr{}, firstErr
}

// upstreamReason classifies a dial or upstream I/O error.
func upstreamReason(err error) string {
	if isTimeout(err) {
		return ReasonUpstreamTimeout
	}
	return ReasonUpstreamError
}

func isTimeout(err error) bool {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func hostPort(host string, port int) string {
	return net.JoinHostPort(host, strconv.Itoa(port))
}
