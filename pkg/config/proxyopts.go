package config

import (
	"crypto/x509"
	"fmt"
	"net/netip"
	"os"
	"strings"

	"github.com/crackbox/crackbox/pkg/proxy"
)

// RunOptions is the one builder of proxy.Options from the [proxy] keys that
// apply to a run's private proxy (hosts, resolver, allow_cidrs, default ports,
// timeouts, header and per-client limits), plus extra comma-separated ranges or addresses (--allow-cidr).
// crackbox run, proxy serve and arizuko's turns all build their proxy here.
func (p Proxy) RunOptions(extraCIDRs []string) (proxy.Options, error) {
	opts := proxy.Options{
		Resolver:       p.Resolver,
		DefaultPorts:   p.DefaultPorts,
		DialTimeout:    p.DialTimeout.Duration,
		IdleTimeout:    p.IdleTimeout.Duration,
		HeaderTimeout:  p.HeaderTimeout.Duration,
		MaxClientConns: p.MaxClientConns,
	}
	var err error
	if opts.AllowCIDRs, err = p.CIDRs(); err != nil {
		return opts, err
	}
	if opts.Hosts, err = p.HostAddrs(); err != nil {
		return opts, err
	}
	for _, list := range extraCIDRs {
		for _, s := range strings.Split(list, ",") {
			s = strings.TrimSpace(s)
			if s == "" {
				continue
			}
			pfx, err := netip.ParsePrefix(s)
			if err != nil {
				if a, aerr := netip.ParseAddr(s); aerr == nil {
					pfx = netip.PrefixFrom(a, a.BitLen())
				} else {
					return opts, fmt.Errorf("--allow-cidr %q: want a range like 10.0.0.0/8 or an address", s)
				}
			}
			opts.AllowCIDRs = append(opts.AllowCIDRs, pfx.Masked())
		}
	}
	if p.UpstreamCA != "" {
		pem, err := os.ReadFile(p.UpstreamCA)
		if err != nil {
			return opts, fmt.Errorf("proxy.upstream_ca: %w", err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return opts, fmt.Errorf("proxy.upstream_ca %s: no PEM certificate in it", p.UpstreamCA)
		}
		opts.UpstreamRoots = pool
	}
	return opts, nil
}
