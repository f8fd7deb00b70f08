package acl

import (
	"fmt"
	"strings"
)

// SelfSegment in a scope stands for the requesting folder principal's own path,
// so one seeded role row ("role:member", "mcp:reply", "{self}") serves every folder.
const SelfSegment = "{self}"

// ValidateScope checks a scope glob: '/'-separated segments, each a literal
// folder segment, "*" (exactly one segment), "**" (zero or more) or "{self}".
func ValidateScope(scope string) error {
	if scope == "" {
		return fmt.Errorf("scope is empty (use \"**\" for everything): %w", ErrInvalid)
	}
	for _, s := range strings.Split(scope, "/") {
		switch {
		case s == "":
			return fmt.Errorf("scope %q has an empty segment: %w", scope, ErrInvalid)
		case s == "." || s == "..":
			return fmt.Errorf("scope %q has segment %q: %w", scope, s, ErrInvalid)
		case s == "*" || s == "**" || s == SelfSegment:
		case strings.ContainsAny(s, "*{}\\\x00"):
			return fmt.Errorf("scope %q: segment %q mixes a glob with text; globs are whole segments (\"*\" or \"**\"): %w", scope, s, ErrInvalid)
		}
	}
	return nil
}

// expandSelf replaces {self} segments with self's segments; it reports false
// when the scope uses {self} and there is no folder principal to stand for it.
func expandSelf(scope, self string) (string, bool) {
	if !strings.Contains(scope, SelfSegment) {
		return scope, true
	}
	if self == "" {
		return "", false
	}
	segs := strings.Split(scope, "/")
	for i, s := range segs {
		if s == SelfSegment {
			segs[i] = self
		}
	}
	return strings.Join(segs, "/"), true
}

func split(p string) []string {
	if p == "" {
		return nil
	}
	return strings.Split(p, "/")
}

// ScopeMatch reports whether the folder path (or "" for "no folder", which only
// a scope of "**" matches) lies within the scope glob.
func ScopeMatch(scope, folder string) bool {
	return matchSegs(split(scope), split(folder))
}

func matchSegs(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			for i := 0; i <= len(name); i++ {
				if matchSegs(pat[1:], name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 || (pat[0] != "*" && pat[0] != name[0]) {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// ScopeCovers reports whether every folder matched by inner is also matched by
// outer; delegation uses it so a grant can never be wider than its source.
func ScopeCovers(outer, inner string) bool {
	return coverSegs(split(outer), split(inner))
}

func coverSegs(h, n []string) bool {
	if len(h) == 0 {
		return len(n) == 0
	}
	if h[0] == "**" {
		if coverSegs(h[1:], n) {
			return true
		}
		return len(n) > 0 && coverSegs(h, n[1:])
	}
	if len(n) == 0 {
		return false
	}
	switch n[0] {
	case "**":
		return false
	case "*":
		if h[0] != "*" {
			return false
		}
	default:
		if h[0] != "*" && h[0] != n[0] {
			return false
		}
	}
	return coverSegs(h[1:], n[1:])
}
