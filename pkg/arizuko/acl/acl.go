// Package acl holds the grant model and its one evaluator: rows of
// (principal, action, scope, effect) reached through role membership, where a
// matching deny always wins and no matching allow means deny.
package acl

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
)

// Sentinel errors callers branch on.
var (
	ErrDenied  = errors.New("permission denied")
	ErrInvalid = errors.New("invalid grant")
)

// Effect is allow or deny.
type Effect string

const (
	Allow Effect = "allow"
	Deny  Effect = "deny"
)

// Grant is one acl row.
type Grant struct {
	ID          int64  `json:"id"`
	Principal   string `json:"principal"`
	Action      string `json:"action"`
	Scope       string `json:"scope"`
	Effect      Effect `json:"effect"`
	Params      string `json:"params,omitempty"`
	GrantedBy   string `json:"granted_by,omitempty"`
	GrantOption bool   `json:"grant_option,omitempty"`
}

// Edge makes Member hold every row of Role.
type Edge struct {
	Member string `json:"member"`
	Role   string `json:"role"`
}

// Seeds are the rows every store starts with: members may message on their own
// folder; operators may do anything anywhere and hand it on.
var Seeds = []Grant{
	{Principal: "role:member", Action: "mcp:reply", Scope: SelfSegment, Effect: Allow, GrantedBy: "seed"},
	{Principal: "role:member", Action: "mcp:send", Scope: SelfSegment, Effect: Allow, GrantedBy: "seed"},
	{Principal: "role:operator", Action: "*", Scope: "**", Effect: Allow, GrantedBy: "seed", GrantOption: true},
}

// ValidatePrincipal accepts folder:<path>, role:<name> and user:<id>; never a wildcard.
func ValidatePrincipal(p string) error {
	kind, id, ok := strings.Cut(p, ":")
	if !ok || id == "" {
		return fmt.Errorf("principal %q: want folder:<path>, role:<name> or user:<id>: %w", p, ErrInvalid)
	}
	if strings.ContainsAny(id, "*?{}") {
		return fmt.Errorf("principal %q: wildcards are not principals: %w", p, ErrInvalid)
	}
	switch kind {
	case "folder":
		if err := folder.Validate(id); err != nil {
			return fmt.Errorf("principal %q: %w: %w", p, err, ErrInvalid)
		}
		return nil
	case "role", "user":
		for i := 0; i < len(id); i++ {
			c := id[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("_-.@+:/", c) >= 0) {
				return fmt.Errorf("principal %q has illegal character %q: %w", p, c, ErrInvalid)
			}
		}
		if len(id) > 128 {
			return fmt.Errorf("principal %q is longer than 128 bytes: %w", p, ErrInvalid)
		}
		return nil
	}
	return fmt.Errorf("principal %q: unknown kind %q (want folder, role or user): %w", p, kind, ErrInvalid)
}

// Validate checks every field of a grant row.
func (g Grant) Validate() error {
	if err := ValidatePrincipal(g.Principal); err != nil {
		return err
	}
	if err := ValidateAction(g.Action); err != nil {
		return err
	}
	if err := ValidateScope(g.Scope); err != nil {
		return err
	}
	if g.Effect != Allow && g.Effect != Deny {
		return fmt.Errorf("effect %q: want allow or deny: %w", g.Effect, ErrInvalid)
	}
	if g.Effect == Deny && g.GrantOption {
		return fmt.Errorf("a deny row cannot carry grant_option: %w", ErrInvalid)
	}
	return nil
}

// Policy is a snapshot of all rows and membership edges, indexed for Decide.
type Policy struct {
	rows  map[string][]Grant
	roles map[string][]string
}

// NewPolicy indexes rows and edges; it keeps the given row order.
func NewPolicy(rows []Grant, edges []Edge) *Policy {
	p := &Policy{rows: map[string][]Grant{}, roles: map[string][]string{}}
	for _, g := range rows {
		p.rows[g.Principal] = append(p.rows[g.Principal], g)
	}
	for _, e := range edges {
		p.roles[e.Member] = append(p.roles[e.Member], e.Role)
	}
	return p
}

// Closure returns principal and every role reachable through membership,
// visiting each once so cycles terminate.
func (p *Policy) Closure(principal string) []string {
	seen := map[string]bool{principal: true}
	out := []string{principal}
	for i := 0; i < len(out); i++ {
		for _, r := range p.roles[out[i]] {
			if !seen[r] {
				seen[r] = true
				out = append(out, r)
			}
		}
	}
	return out
}

// Decision is the outcome of one evaluation.
type Decision struct {
	Allow     bool   `json:"allow"`
	Principal string `json:"principal"`
	Action    string `json:"action"`
	Scope     string `json:"scope"`
	Rule      *Grant `json:"rule,omitempty"` // the row that decided; nil for default deny
	Reason    string `json:"reason"`
}

// Err is nil for an allow and a wrapped ErrDenied otherwise.
func (d Decision) Err() error {
	if d.Allow {
		return nil
	}
	return fmt.Errorf("%s may not %s on %q: %s: %w", d.Principal, d.Action, d.Scope, d.Reason, ErrDenied)
}

func selfOf(principal string) string {
	if f, ok := strings.CutPrefix(principal, "folder:"); ok {
		return f
	}
	return ""
}

// HoldsAny reports whether principal holds an allow row for action on some
// scope: a list it cannot read whole is then filtered, not refused.
func (p *Policy) HoldsAny(principal, action string) bool {
	for _, who := range p.Closure(principal) {
		for _, g := range p.rows[who] {
			if g.Effect == Allow && ActionMatch(g.Action, action) {
				return true
			}
		}
	}
	return false
}

// Decide is the evaluator: may principal perform action on the folder scope?
// A matching deny anywhere in the membership closure wins; otherwise the first
// matching allow; otherwise deny.
func (p *Policy) Decide(principal, action, scope string) Decision {
	d := Decision{Principal: principal, Action: action, Scope: scope}
	self := selfOf(principal)
	var allow *Grant
	for _, who := range p.Closure(principal) {
		for i := range p.rows[who] {
			g := &p.rows[who][i]
			if !ActionMatch(g.Action, action) {
				continue
			}
			s, ok := expandSelf(g.Scope, self)
			if !ok || !ScopeMatch(s, scope) {
				continue
			}
			if g.Effect == Deny {
				d.Rule, d.Reason = g, fmt.Sprintf("denied by row %d (%s %s %s)", g.ID, g.Principal, g.Action, g.Scope)
				return d
			}
			if allow == nil {
				allow = g
			}
		}
	}
	if allow == nil {
		d.Reason = "no matching allow row"
		return d
	}
	d.Allow, d.Rule = true, allow
	d.Reason = fmt.Sprintf("allowed by row %d (%s %s %s)", allow.ID, allow.Principal, allow.Action, allow.Scope)
	return d
}
