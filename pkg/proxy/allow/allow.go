// Package allow is the host allowlist matcher. Every component that decides
// whether a host name may be reached (the egress proxy, the DNS responder of
// the network jail, arizuko grants) uses this one implementation.
//
// Entry syntax:
//
//	example.com      exactly that host
//	*.example.com    any subdomain at any depth, not the apex
//	.example.com     the apex and every subdomain
//	*                any host (must be spelled on purpose)
//
//	192.0.2.10       that address, when a client names it as an IP literal
//	10.20.0.0/16     any address in the range, named as an IP literal
//	[2001:db8::1]    an IPv6 address (brackets needed only before a port)
//
// Any entry may end in ":port", which restricts it to that port; entries
// without a port allow only the list's default ports (80 and 443 unless
// ParseWithPorts says otherwise). Names compare case-insensitively, with one
// trailing dot ignored and IDNs in punycode.
//
// Names and addresses are kept apart. A host-name entry, even "*", never
// matches an IP literal, and an address entry never matches a name: a client
// that asks for an IP literal gets through only when an address entry names
// it. The proxy's allow_cidrs setting is a different thing: it lets the
// addresses that allowed names resolve to lie in private ranges, and it never
// opens an IP literal. So allowing git.internal, which resolves into
// 10.0.0.0/8, with allow_cidrs = ["10.0.0.0/8"] does not let a sandbox dial
// 10.9.9.9 by address; only an allowlist entry naming 10.9.9.9 (or a range
// holding it) does. See Prefixes for how the proxy's guard treats them.
package allow

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/net/publicsuffix"
)

// Sentinels callers branch on; returned errors wrap them with detail.
var (
	ErrHostNotAllowed = errors.New("host not allowed")
	ErrPortNotAllowed = errors.New("port not allowed")
	ErrInvalidEntry   = errors.New("invalid allow entry")
)

// DefaultPorts are the ports an entry without ":port" allows when the list
// was built with Parse.
var DefaultPorts = []int{80, 443}

// EffectivePorts is the one rule for which ports an entry without ":port"
// allows: the first non-empty of lists (the proxy's default_ports option, then
// the list's own), else DefaultPorts. The result is a copy.
func EffectivePorts(lists ...[]int) []int { return slices.Clone(effectivePorts(lists...)) }

// effectivePorts is EffectivePorts without the copy, for the per-request check.
func effectivePorts(lists ...[]int) []int {
	for _, l := range lists {
		if len(l) > 0 {
			return l
		}
	}
	return DefaultPorts
}

type kind uint8

const (
	kindExact kind = iota // example.com
	kindSub               // *.example.com
	kindTree              // .example.com
	kindAny               // *
	kindAddr              // 192.0.2.10, 10.0.0.0/8: IP literals only
)

type rule struct {
	kind kind
	host string       // normalized base name; empty for kindAny and kindAddr
	pfx  netip.Prefix // kindAddr: the addresses it covers
	port int          // 0 = the list's default ports
}

func (r rule) String() string {
	var s string
	switch r.kind {
	case kindExact:
		s = r.host
	case kindSub:
		s = "*." + r.host
	case kindTree:
		s = "." + r.host
	case kindAny:
		s = "*"
	case kindAddr:
		s = r.pfx.String()
		if r.pfx.IsSingleIP() {
			s = r.pfx.Addr().String()
		}
		if r.port != 0 && r.pfx.Addr().Is6() {
			s = "[" + s + "]"
		}
	}
	if r.port != 0 {
		s += ":" + strconv.Itoa(r.port)
	}
	return s
}

// List is an immutable, validated allowlist. The zero value and nil allow nothing.
type List struct {
	rules        []rule
	defaultPorts []int
}

// Parse validates every entry and builds a list whose port-less entries allow
// DefaultPorts. The error names the first bad entry and why it is bad.
func Parse(entries []string) (*List, error) {
	return ParseWithPorts(entries, nil)
}

// ParseWithPorts is Parse with explicit default ports for entries without
// ":port"; nil or empty means DefaultPorts.
func ParseWithPorts(entries []string, defaultPorts []int) (*List, error) {
	for _, p := range defaultPorts {
		if p < 1 || p > 65535 {
			return nil, fmt.Errorf("default port %d: must be 1..65535: %w", p, ErrInvalidEntry)
		}
	}
	l := &List{defaultPorts: EffectivePorts(defaultPorts)}
	for _, e := range entries {
		r, err := parseEntry(e)
		if err != nil {
			return nil, err
		}
		l.rules = append(l.rules, r)
	}
	l.normalize()
	return l, nil
}

// normalize sorts and deduplicates rules so Entries is stable.
func (l *List) normalize() {
	slices.SortFunc(l.rules, func(a, b rule) int { return strings.Compare(a.String(), b.String()) })
	l.rules = slices.CompactFunc(l.rules, func(a, b rule) bool { return a == b })
}

func parseEntry(raw string) (rule, error) {
	bad := func(why string) (rule, error) {
		return rule{}, fmt.Errorf("allow entry %q: %s: %w", raw, why, ErrInvalidEntry)
	}
	e := strings.TrimSpace(raw)
	if e == "" {
		return bad("empty entry")
	}
	if strings.Contains(e, "://") || strings.ContainsAny(e, "?#@ ") {
		return bad("expected a host name like example.com or *.example.com[:port], not a URL")
	}
	// An unbracketed IPv6 address or range takes no port.
	host, port := e, 0
	if strings.HasPrefix(e, "[") || strings.Count(e, ":") <= 1 {
		var err error
		if host, port, err = SplitHostPort(e); err != nil {
			return bad(err.Error())
		}
	}
	if r, ok, why := parseAddrEntry(e, host, port); ok || why != "" {
		if why != "" {
			return bad(why)
		}
		return r, nil
	}
	if strings.Contains(host, "/") {
		return bad("expected a host name like example.com or *.example.com[:port], not a URL")
	}
	r := rule{port: port}
	e = host
	switch {
	case e == "*":
		r.kind = kindAny
		return r, nil
	case strings.HasPrefix(e, "*."):
		r.kind = kindSub
		e = e[2:]
	case strings.HasPrefix(e, "."):
		r.kind = kindTree
		e = e[1:]
	default:
		r.kind = kindExact
	}
	if strings.Contains(e, "*") {
		return bad("'*' is only allowed as a leading \"*.\" label or as the whole entry")
	}
	if _, err := netip.ParseAddr(strings.TrimSuffix(e, ".")); err == nil {
		return bad("an address entry takes no wildcard or trailing dot")
	}
	h, err := normalizeHost(e)
	if err != nil {
		return bad(err.Error())
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return bad("an address entry takes no wildcard or trailing dot")
	}
	r.host = h
	if r.kind != kindExact {
		if !strings.Contains(h, ".") {
			return bad("wildcard over a bare top-level domain would allow a whole TLD")
		}
		if ps, icann := publicsuffix.PublicSuffix(h); icann && ps == h {
			return bad(fmt.Sprintf("wildcard over public suffix %q would allow every domain under it", h))
		}
	}
	return r, nil
}

// Check reports whether host:port is allowed: nil, or an error wrapping
// ErrHostNotAllowed or ErrPortNotAllowed. A host that matches some entry, but
// on no port that entry allows, is a port denial.
func (l *List) Check(host string, port int) error {
	var dp []int
	if l != nil {
		dp = l.defaultPorts
	}
	return l.CheckWithPorts(host, port, dp)
}

// CheckWithPorts is Check with the default ports for port-less entries given
// by the caller (the proxy's DefaultPorts option); empty means the list's own.
func (l *List) CheckWithPorts(host string, port int, defaultPorts []int) error {
	h, err := NormalizeHost(host)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrHostNotAllowed, err)
	}
	if l == nil {
		return fmt.Errorf("%w: %s (empty allowlist)", ErrHostNotAllowed, h)
	}
	defaultPorts = effectivePorts(defaultPorts, l.defaultPorts)
	addr, err := netip.ParseAddr(h)
	literal := err == nil
	matched := false
	for _, r := range l.rules {
		if literal && !r.matchAddr(addr) || !literal && !r.matchHost(h) {
			continue
		}
		matched = true
		if r.port == port || r.port == 0 && slices.Contains(defaultPorts, port) {
			return nil
		}
	}
	if matched {
		return fmt.Errorf("%w: %s:%d", ErrPortNotAllowed, h, port)
	}
	if literal {
		return fmt.Errorf("%w: %s is an IP literal and no address entry of the allowlist covers it", ErrHostNotAllowed, h)
	}
	return fmt.Errorf("%w: %s", ErrHostNotAllowed, h)
}

// matchAddr reports whether an address entry covers the IP literal a.
func (r rule) matchAddr(a netip.Addr) bool {
	return r.kind == kindAddr && r.pfx.Contains(a.Unmap())
}

// Prefixes returns the ranges the address entries name, whatever their
// ports. The proxy's guard lets an IP literal in one of them through even
// when it is private, since the operator named it; the proxy host's own
// addresses stay refused unless an entry names exactly that address.
func (l *List) Prefixes() []netip.Prefix {
	if l == nil {
		return nil
	}
	var out []netip.Prefix
	for _, r := range l.rules {
		if r.kind == kindAddr && !slices.Contains(out, r.pfx) {
			out = append(out, r.pfx)
		}
	}
	return out
}

func (r rule) matchHost(h string) bool {
	switch r.kind {
	case kindAddr:
		return false
	case kindAny:
		return true
	case kindExact:
		return h == r.host
	case kindSub:
		return len(h) > len(r.host)+1 && strings.HasSuffix(h, r.host) && h[len(h)-len(r.host)-1] == '.'
	case kindTree:
		return h == r.host || len(h) > len(r.host)+1 && strings.HasSuffix(h, r.host) && h[len(h)-len(r.host)-1] == '.'
	}
	return false
}

// Entries returns the normalized entries, sorted and without duplicates.
func (l *List) Entries() []string {
	if l == nil {
		return []string{}
	}
	out := make([]string, len(l.rules))
	for i, r := range l.rules {
		out[i] = r.String()
	}
	return out
}

// DefaultPortList returns the ports entries without ":port" allow.
func (l *List) DefaultPortList() []int {
	if l == nil {
		return EffectivePorts()
	}
	return EffectivePorts(l.defaultPorts)
}

// With returns a copy with add entries added and remove entries removed
// (compared after normalization; removing an absent entry is not an error).
// The receiver is unchanged, so readers holding it never see a partial edit.
func (l *List) With(add, remove []string) (*List, error) {
	n := &List{defaultPorts: DefaultPorts}
	if l != nil {
		n.rules = slices.Clone(l.rules)
		n.defaultPorts = slices.Clone(l.defaultPorts)
	}
	for _, e := range add {
		r, err := parseEntry(e)
		if err != nil {
			return nil, err
		}
		n.rules = append(n.rules, r)
	}
	for _, e := range remove {
		r, err := parseEntry(e)
		if err != nil {
			return nil, err
		}
		n.rules = slices.DeleteFunc(n.rules, func(x rule) bool { return x == r })
	}
	n.normalize()
	return n, nil
}
