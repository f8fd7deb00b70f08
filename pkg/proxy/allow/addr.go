package allow

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// SplitHostPort splits host[:port] text by the one grammar the allowlist and
// the proxy share, so what an operator can write and what a guest can ask
// for never drift apart: an IPv6 address goes in brackets when a port
// follows, brackets hold only an IPv6 address (or range) without a zone, and
// a port is 1..65535 in plain decimal. port is 0 when s names none. It
// checks the split only; what may stand in host is the caller's to decide.
func SplitHostPort(s string) (host string, port int, err error) {
	portText, hasPort := "", false
	switch {
	case strings.HasPrefix(s, "["):
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", 0, errors.New("unclosed '[' in an IPv6 address")
		}
		host = s[1:end]
		if rest := s[end+1:]; rest != "" {
			if rest[0] != ':' {
				return "", 0, fmt.Errorf("unexpected %q after ']'; write [address]:port", rest)
			}
			portText, hasPort = rest[1:], true
		}
		if !strings.Contains(host, ":") {
			return "", 0, fmt.Errorf("%q is not an IP address in brackets; brackets hold only IPv6 addresses", host)
		}
		if strings.Contains(host, "%") {
			return "", 0, errors.New("an address cannot carry a zone")
		}
	default:
		switch strings.Count(s, ":") {
		case 0:
			host = s
		case 1:
			host, portText, _ = strings.Cut(s, ":")
			hasPort = true
		default:
			return "", 0, errors.New("an IPv6 address with a port must be in brackets, like [2001:db8::1]:443")
		}
	}
	if host == "" {
		return "", 0, errors.New("empty host")
	}
	if hasPort {
		p, why := parsePort(portText)
		if why != "" {
			return "", 0, errors.New(why)
		}
		port = p
	}
	return host, port, nil
}

// parseAddrEntry parses the host part of an entry as an address: an IP or a
// CIDR range, the port split off already. ok is false and why empty when
// host is not an address at all; why says what is wrong with one.
func parseAddrEntry(e, host string, port int) (r rule, ok bool, why string) {
	pfx, isAddr, why := parsePrefix(host)
	if !isAddr {
		if strings.HasPrefix(e, "[") || strings.Count(e, ":") > 1 {
			return rule{}, false, fmt.Sprintf("%q is not an IP address or CIDR range", host)
		}
		return rule{}, false, why
	}
	if why != "" {
		return rule{}, false, why
	}
	return rule{kind: kindAddr, pfx: pfx, port: port}, true, ""
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

// parsePort reads a port 1..65535 written in plain decimal: no sign, no
// leading zero, nothing but digits.
func parsePort(ps string) (int, string) {
	if ps == "" {
		return 0, "empty port after ':'; a port must be a number 1..65535"
	}
	p := 0
	for _, c := range ps {
		if c < '0' || c > '9' || p > 65535 {
			return 0, fmt.Sprintf("port %q must be a number 1..65535", ps)
		}
		p = p*10 + int(c-'0')
	}
	if p < 1 || p > 65535 || ps[0] == '0' {
		return 0, fmt.Sprintf("port %q must be a number 1..65535", ps)
	}
	return p, ""
}
