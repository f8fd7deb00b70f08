package allow

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"
)

// ErrInvalidHost is wrapped by NormalizeHost when a name cannot be a DNS host name.
var ErrInvalidHost = errors.New("invalid host name")

const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// idnaProfile maps Unicode names to punycode the way lookups do, but leaves
// character policy to validateASCII so underscores (legal in DNS, used by
// some services) survive and every rejection carries our own message.
var idnaProfile = idna.New(
	idna.MapForLookup(),
	idna.Transitional(false),
	idna.StrictDomainName(false),
	idna.BidiRule(),
)

// NormalizeHost returns the canonical form of a host name used for every
// comparison: lowercase, one trailing dot stripped, IDN labels converted to
// punycode. It rejects empty labels, illegal characters and over-long names.
// IP literals are returned unchanged apart from canonical formatting; callers
// that treat IPs differently should check with netip.ParseAddr first.
func NormalizeHost(h string) (string, error) {
	n, err := normalizeHost(h)
	if err != nil {
		return "", fmt.Errorf("host %q: %w: %w", h, err, ErrInvalidHost)
	}
	return n, nil
}

// normalizeHost returns the reason without the input so parse errors can
// name the whole entry instead.
func normalizeHost(h string) (string, error) {
	if h == "" {
		return "", errors.New("empty name")
	}
	h = strings.TrimSuffix(h, ".")
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String(), nil
	}
	if h == "" {
		return "", errors.New("empty name")
	}
	ascii := true
	for i := 0; i < len(h); i++ {
		if h[i] >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		h = strings.ToLower(h)
	} else {
		a, err := idnaProfile.ToASCII(h)
		if err != nil {
			return "", fmt.Errorf("not a valid internationalized name: %v", err)
		}
		h = strings.ToLower(a)
	}
	if err := validateASCII(h); err != nil {
		return "", err
	}
	return h, nil
}

// validateASCII checks an already lowercased ASCII name against DNS rules:
// labels of 1..63 characters from [a-z0-9_-] that do not start or end with a
// hyphen, 253 characters at most, and punycode labels that decode.
func validateASCII(h string) error {
	if h == "" {
		return errors.New("empty name")
	}
	if len(h) > maxNameLen {
		return fmt.Errorf("name is %d characters, the limit is %d", len(h), maxNameLen)
	}
	for _, label := range strings.Split(h, ".") {
		if label == "" {
			return errors.New("empty label (consecutive, leading or extra trailing dot)")
		}
		if len(label) > maxLabelLen {
			return fmt.Errorf("label %q is %d characters, the limit is %d", label, len(label), maxLabelLen)
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_'
			if !ok {
				return fmt.Errorf("label %q has illegal character %q (allowed: letters, digits, '-', '_')", label, c)
			}
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with '-'", label)
		}
		if strings.HasPrefix(label, "xn--") {
			if _, err := idna.Punycode.ToUnicode(label); err != nil {
				return fmt.Errorf("label %q is not valid punycode", label)
			}
		}
	}
	return nil
}
