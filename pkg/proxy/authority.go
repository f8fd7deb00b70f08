package proxy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// ErrBadAuthority is wrapped by parseAuthority for malformed host[:port] text.
var ErrBadAuthority = errors.New("malformed authority")

// parseAuthority splits a CONNECT target or URL host into host and port.
// defaultPort applies when the text has no port; 0 makes the port required.
// The host[:port] grammar is the allowlist's (allow.SplitHostPort); userinfo,
// paths, spaces and empty parts are refused on top.
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
	host, port, err := allow.SplitHostPort(s)
	if err != nil {
		return bad(err.Error())
	}
	if port == 0 {
		port = defaultPort
	}
	if port == 0 {
		return bad("missing port")
	}
	return host, port, nil
}
