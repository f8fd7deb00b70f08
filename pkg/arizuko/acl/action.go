package acl

import (
	"fmt"
	"strings"
)

// ValidateAction checks an action pattern: "*", "<ns>:*", or an exact
// "<ns>:<name>" / plain name of letters, digits, '_', '-', '.' and ':'.
func ValidateAction(a string) error {
	if a == "" {
		return fmt.Errorf("action is empty: %w", ErrInvalid)
	}
	if a == "*" {
		return nil
	}
	body := strings.TrimSuffix(a, ":*")
	// Only an inject action names a host after its secret (KEY@host).
	at := strings.HasPrefix(body, InjectFamily)
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':' || c == '@' && at) {
			return fmt.Errorf("action %q has illegal character %q (wildcards: \"*\" alone or a trailing \":*\"): %w", a, c, ErrInvalid)
		}
	}
	if body == "" || strings.HasPrefix(body, ":") || strings.HasSuffix(body, ":") {
		return fmt.Errorf("action %q: empty namespace or name: %w", a, ErrInvalid)
	}
	return nil
}

// ActionMatch reports whether the pattern covers the concrete action:
// "*" covers everything, "mcp:*" covers every "mcp:<tool>", else exact.
func ActionMatch(pattern, action string) bool {
	if pattern == "*" || pattern == action {
		return true
	}
	if ns, ok := strings.CutSuffix(pattern, ":*"); ok {
		return strings.HasPrefix(action, ns+":")
	}
	return false
}

// ActionCovers reports whether every action matched by inner is matched by outer.
func ActionCovers(outer, inner string) bool {
	if outer == "*" || outer == inner {
		return true
	}
	if inner == "*" {
		return false
	}
	ns, ok := strings.CutSuffix(outer, ":*")
	return ok && strings.HasPrefix(inner, ns+":")
}
