package acl

import (
	"fmt"
	"slices"
	"strings"
)

// InjectFamily prefixes the actions that bind a folder secret to a host:
// inject:<KEY>@<host> gives the agent's guest a placeholder for KEY, and the
// run's proxy puts the value into HTTPS requests to host and nowhere else.
const InjectFamily = "inject:"

// InjectAction is the action binding secret name to host.
func InjectAction(name, host string) string { return InjectFamily + name + "@" + host }

// ParseInject splits a concrete inject action into secret name and host.
func ParseInject(a string) (name, host string, ok bool) {
	rest, ok := strings.CutPrefix(a, InjectFamily)
	if !ok {
		return "", "", false
	}
	name, host, ok = strings.Cut(rest, "@")
	return name, host, ok && validateInject(a) == nil
}

// validateInject checks inject:<KEY>@<host>: KEY an environment variable
// name, host one lowercase DNS name without wildcard or port. "inject:*" is
// the namespace wildcard and is checked elsewhere.
func validateInject(a string) error {
	rest := strings.TrimPrefix(a, InjectFamily)
	name, host, ok := strings.Cut(rest, "@")
	bad := func(why string) error {
		return fmt.Errorf("action %q: %s; want inject:<KEY>@<host>, e.g. inject:ANTHROPIC_API_KEY@api.anthropic.com: %w", a, why, ErrInvalid)
	}
	if !ok || name == "" || host == "" {
		return bad("no KEY@host")
	}
	for i, c := range name {
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' && i > 0) {
			return bad(fmt.Sprintf("secret name %q is not an environment variable name", name))
		}
	}
	labels := strings.Split(host, ".")
	for _, l := range labels {
		if l == "" || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return bad(fmt.Sprintf("host %q is not a DNS name", host))
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return bad(fmt.Sprintf("host %q: one lowercase DNS name, no wildcard, port or address", host))
			}
		}
	}
	if len(labels) < 2 || strings.Trim(host, "0123456789.") == "" {
		return bad(fmt.Sprintf("host %q: name a host such as api.example.com", host))
	}
	return nil
}

// Injections is every secret-to-host binding principal holds on scope: the
// concrete inject:<KEY>@<host> allow rows in its membership closure that
// Decide also allows, so a deny (inject:* or the exact row) wins. It maps
// each secret name to its sorted hosts.
func (p *Policy) Injections(principal, scope string) map[string][]string {
	out := map[string][]string{}
	for _, who := range p.Closure(principal) {
		for _, g := range p.rows[who] {
			name, host, ok := ParseInject(g.Action)
			if !ok || g.Effect != Allow || slices.Contains(out[name], host) {
				continue
			}
			if p.Decide(principal, g.Action, scope).Allow {
				out[name] = append(out[name], host)
			}
		}
	}
	for _, hosts := range out {
		slices.Sort(hosts)
	}
	return out
}
