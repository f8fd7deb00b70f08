package acl

import (
	"fmt"
	"strings"
)

// CanGrant decides whether granter may add row g. A granter hands on only a
// subset of an allow row it holds with grant_option (action and scope covered,
// same params), never to a wildcard principal, and never wider than a deny it
// is itself under. Deny rows and {self} scopes change what others hold, so
// only a root granter (grant_option on "*" over "**") may add them.
func (p *Policy) CanGrant(granter string, g Grant) Decision {
	d := Decision{Principal: granter, Action: "grant:" + g.Action, Scope: g.Scope}
	deny := func(why string) Decision { d.Reason = why; return d }
	if err := g.Validate(); err != nil {
		return deny(err.Error())
	}
	self := selfOf(granter)
	closure := p.Closure(granter)
	var source *Grant
	root := false
	for _, who := range closure {
		for i := range p.rows[who] {
			r := &p.rows[who][i]
			s, ok := expandSelf(r.Scope, self)
			if !ok {
				continue
			}
			if r.Effect == Deny {
				if actionsOverlap(r.Action, g.Action) && scopesOverlap(s, g.Scope) {
					d.Rule = r
					return deny(fmt.Sprintf("granter is itself denied %s on %s by row %d", r.Action, r.Scope, r.ID))
				}
				continue
			}
			if !r.GrantOption {
				continue
			}
			if r.Action == "*" && s == "**" && r.Params == "" {
				root = true
			}
			if source == nil && ActionCovers(r.Action, g.Action) && ScopeCovers(s, g.Scope) && (r.Params == "" || r.Params == g.Params) {
				source = r
			}
		}
	}
	switch {
	case g.Effect == Deny && !root:
		return deny("only a root granter may add deny rows")
	case strings.Contains(g.Scope, SelfSegment) && !root:
		return deny("only a root granter may grant a {self} scope")
	case source == nil:
		return deny("granter holds no grant_option row covering this action and scope")
	}
	d.Allow, d.Rule = true, source
	d.Reason = fmt.Sprintf("delegated from row %d", source.ID)
	return d
}

func actionsOverlap(a, b string) bool { return ActionCovers(a, b) || ActionCovers(b, a) }

func scopesOverlap(a, b string) bool { return overlapSegs(split(a), split(b)) }

// overlapSegs reports whether some folder path matches both globs.
func overlapSegs(a, b []string) bool {
	switch {
	case len(a) > 0 && a[0] == "**":
		return overlapSegs(a[1:], b) || (len(b) > 0 && overlapSegs(a, b[1:]))
	case len(b) > 0 && b[0] == "**":
		return overlapSegs(a, b[1:]) || (len(a) > 0 && overlapSegs(a[1:], b))
	case len(a) == 0 || len(b) == 0:
		return len(a) == len(b)
	case a[0] != "*" && b[0] != "*" && a[0] != b[0]:
		return false
	}
	return overlapSegs(a[1:], b[1:])
}
