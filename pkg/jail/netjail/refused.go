package netjail

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy"
)

// refusedAddr is the address an allowed name resolved to that the proxy refused, and
// what kind of address it is.
type refusedAddr struct {
	addr  netip.Addr
	class string
}

// noteRefused records that name resolved only to addresses the guard refused; the
// first address seen stands for the name. Callers hold t.mu.
func (t *Tally) noteRefused(name string, a refusedAddr) {
	if _, ok := t.refused[name]; ok || len(t.refused) >= maxNames {
		return
	}
	t.refused[name] = a
}

// refusedOf reads the refused address of a decision, if the guard refused one for a name.
func refusedOf(d proxy.Decision) (refusedAddr, bool) {
	if d.Reason != proxy.ReasonPrivateAddress || d.Class == "" {
		return refusedAddr{}, false
	}
	a, err := netip.ParseAddr(d.IP)
	if err != nil {
		return refusedAddr{}, false
	}
	if _, err := netip.ParseAddr(d.Host); err == nil {
		// An IP literal is opened by an allowlist entry, which the summary already names.
		return refusedAddr{}, false
	}
	return refusedAddr{a, d.Class}, true
}

// refusedClause is the summary clause for allowed names whose addresses were refused:
// each name with its address and class, then the --allow-cidr entries that open them.
// Callers hold t.mu.
func (t *Tally) refusedClause() string {
	if len(t.refused) == 0 {
		return ""
	}
	names := make([]string, 0, len(t.refused))
	for n := range t.refused {
		names = append(names, n)
	}
	slices.Sort(names)
	var parts, cidrs []string
	for i, n := range names {
		r := t.refused[n]
		if i < summaryTop {
			parts = append(parts, fmt.Sprintf("%s resolves only to %s, %s", n, r.addr, r.class))
		}
		if c := netip.PrefixFrom(r.addr, r.addr.BitLen()).String(); !slices.Contains(cidrs, c) {
			cidrs = append(cidrs, c)
		}
	}
	parts = appendMore(parts, len(names)-len(parts), 0)
	return fmt.Sprintf("refused the %s of %d allowed %s: %s; if %s right, allow %s with --allow-cidr %s (or allow_cidrs in crackbox.toml)",
		plural(len(names), "address", "addresses"), len(names), plural(len(names), "name", "names"), strings.Join(parts, "; "),
		plural(len(cidrs), "that address is", "those addresses are"), plural(len(cidrs), "it", "them"), strings.Join(cidrs, ","))
}

// learnTimeout bounds the lookups --learn makes at exit to name the --allow-cidr
// entries the learned hosts would need.
const learnTimeout = 5 * time.Second

// learnCIDRs resolves each learned host name through the run's proxy and returns the
// single-address ranges of the names it would refuse every address of: the --allow-cidr
// entries the command needs beside its --allow list.
func learnCIDRs(p *proxy.Proxy, learned []string) []string {
	if p == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), learnTimeout)
	defer cancel()
	var out []string
	seen := map[string]bool{}
	for _, e := range learned {
		if _, err := netip.ParseAddr(e); err == nil {
			continue
		}
		if _, err := netip.ParseAddrPort(e); err == nil {
			continue
		}
		host, _, _ := strings.Cut(e, ":")
		if seen[host] || ctx.Err() != nil {
			continue
		}
		seen[host] = true
		_, err := p.Resolve(ctx, host)
		var ae *proxy.AddrError
		if errors.As(err, &ae) {
			if c := ae.Prefix().String(); !slices.Contains(out, c) {
				out = append(out, c)
			}
		}
	}
	return out
}
