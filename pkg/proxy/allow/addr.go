package allow

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// parseAddrEntry parses an address entry: an IP or a CIDR range, with an
// optional ":port" (an IPv6 one then in brackets). ok is false and why empty
// when e is not an address entry at all; why says what is wrong with one.
func parseAddrEntry(e string) (r rule, ok bool, why string) {
	body, port := e, ""
	switch {
	case strings.HasPrefix(e, "["):
		end := strings.IndexByte(e, ']')
		if end < 0 {
			return rule{}, false, "unclosed '[' in an IPv6 entry"
		}
		body, port = e[1:end], e[end+1:]
		if port != "" && !strings.HasPrefix(port, ":") {
			return rule{}, false, fmt.Sprintf("unexpected %q after ']'; write [address]:port", port)
		}
		port = strings.TrimPrefix(port, ":")
		if port == "" && e[end+1:] != "" {
			return rule{}, false, "empty port after ':'"
		}
	case strings.Count(e, ":") == 1:
		i := strings.IndexByte(e, ':')
		body, port = e[:i], e[i+1:]
	}
	pfx, isAddr, why := parsePrefix(body)
	if !isAddr {
		if strings.HasPrefix(e, "[") || strings.Count(e, ":") > 1 {
			return rule{}, false, fmt.Sprintf("%q is not an IP address or CIDR range", body)
		}
		return rule{}, false, why
	}
	if why != "" {
		return rule{}, false, why
	}
	r = rule{kind: kindAddr, pfx: pfx}
	if port != "" {
		p, why := parsePort(port)
		if why != "" {
			return rule{}, false, why
		}
		r.port = p
	}
	return r, true, ""
}

// parsePrefix reads an address or a range. isAddr is false when s does not
// look like one (a host name); why is set when it does but is not valid.
func parsePrefix(s string) (pfx netip.Prefix, isAddr bool, why string) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Prefix{}, true, "an address entry cannot carry a zone"
		}
		a = a.Unmap()
		return netip.PrefixFrom(a, a.BitLen()), true, ""
	}
	base, _, cut := strings.Cut(s, "/")
	if _, err := netip.ParseAddr(base); !cut || err != nil {
		return netip.Prefix{}, false, ""
	}
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, true, fmt.Sprintf("%q is not a CIDR range like 10.20.0.0/16", s)
	}
	if p.Addr().Is4In6() {
		return netip.Prefix{}, true, "write an IPv4 range in IPv4 form"
	}
	if p.Masked() != p {
		return netip.Prefix{}, true, fmt.Sprintf("range %s has host bits set; did you mean %s?", p, p.Masked())
	}
	return p, true, ""
}

// parsePort reads a port 1..65535 written without sign or leading zero.
func parsePort(ps string) (int, string) {
	p, err := strconv.Atoi(ps)
	if err != nil || p < 1 || p > 65535 || ps[0] == '+' || ps[0] == '0' {
		return 0, fmt.Sprintf("port %q must be a number 1..65535", ps)
	}
	return p, ""
}
