package proxy

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// ErrBadAuthority is wrapped by parseAuthority for malformed host[:port] text.
var ErrBadAuthority = errors.New("malformed authority")

// parseAuthority splits a CONNECT target or URL host into host and port.
// defaultPort applies when the text has no port; 0 makes the port required.
// IPv6 literals must be bracketed; userinfo, paths and empty parts are refused.
func parseAuthority(s string, defaultPort int) (string, int, error) {
	bad := func(why string) (string, int, error) {
		return "", 0, fmt.Errorf("%w %q: %s", ErrBadAuthority, s, why)
	}
	if s == "" {
		return bad("empty")
	}
	if len(s) > 1024 {
		return bad("too long")
	}
	if strings.ContainsAny(s, "@/?#\\ \t\r\n") {
		return bad("want host:port only")
	}
	host, portText := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return bad("unclosed '['")
		}
		host, portText = s[1:end], s[end+1:]
		if portText != "" {
			if portText[0] != ':' {
				return bad("junk after ']'")
			}
			portText = portText[1:]
			if portText == "" {
				return bad("empty port")
			}
		}
		if !strings.Contains(host, ":") {
			return bad("brackets are only for IPv6 addresses")
		}
	} else {
		switch strings.Count(s, ":") {
		case 0:
		case 1:
			var err error
			host, portText, err = net.SplitHostPort(s)
			if err != nil {
				return bad(err.Error())
			}
			if portText == "" {
				return bad("empty port")
			}
		default:
			return bad("IPv6 addresses must be in brackets")
		}
	}
	if host == "" {
		return bad("empty host")
	}
	port := defaultPort
	if portText != "" {
		for _, c := range portText {
			if c < '0' || c > '9' {
				return bad("port is not a number")
			}
		}
		if len(portText) > 1 && portText[0] == '0' {
			return bad("port has leading zeros")
		}
		p, err := strconv.Atoi(portText)
		if err != nil || p < 1 || p > 65535 {
			return bad("port out of range 1..65535")
		}
		port = p
	}
	if port == 0 {
		return bad("missing port")
	}
	return host, port, nil
}
