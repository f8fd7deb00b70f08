package acl

import (
	"context"
	"errors"
	"testing"
)

func TestScopeMatch(t *testing.T) {
	cases := []struct {
		scope, folder string
		want          bool
	}{
		{"**", "", true},
		{"**", "a", true},
		{"**", "a/b/c", true},
		{"corp/eng/**", "corp/eng", true},
		{"corp/eng/**", "corp/eng/sre", true},
		{"corp/eng/**", "corp/eng/sre/oncall", true},
		{"corp/eng/**", "corp/engineering", false},
		{"corp/eng/**", "corp", false},
		{"corp/eng/*", "corp/eng", false},
		{"corp/eng/*", "corp/eng/sre", true},
		{"corp/eng/*", "corp/eng/sre/oncall", false},
		{"corp/*/sre", "corp/eng/sre", true},
		{"corp/*/sre", "corp/sre", false},
		{"**/sre", "corp/eng/sre", true},
		{"**/sre", "sre", true},
		{"corp", "corp", true},
		{"corp", "corp/eng", false},
		{"corp/**", "", false},
		{"*", "", false},
	}
	for _, c := range cases {
		if got := ScopeMatch(c.scope, c.folder); got != c.want {
			t.Errorf("ScopeMatch(%q, %q) = %v, want %v", c.scope, c.folder, got, c.want)
		}
	}
}

func TestActionMatch(t *testing.T) {
	cases := []struct {
		pattern, action string
		want            bool
	}{
		{"*", "mcp:reply", true},
		{"*", "folder:add", true},
		{"mcp:*", "mcp:reply", true},
		{"mcp:*", "mcp:send", true},
		{"mcp:*", "mcpx:reply", false},
		{"mcp:*", "folder:add", false},
		{"mcp:reply", "mcp:reply", true},
		{"mcp:reply", "mcp:send", false},
		{"mcp:reply", "mcp:reply_all", false},
	}
	for _, c := range cases {
		if got := ActionMatch(c.pattern, c.action); got != c.want {
			t.Errorf("ActionMatch(%q, %q) = %v, want %v", c.pattern, c.action, got, c.want)
		}
	}
}

func TestDecide(t *testing.T) {
	rows := append([]Grant{
		{ID: 10, Principal: "user:alice", Action: "mcp:*", Scope: "corp/eng/**", Effect: Allow},
		{ID: 11, Principal: "user:alice", Action: "mcp:delegate_group", Scope: "corp/eng/secret", Effect: Deny},
		{ID: 12, Principal: "role:eng", Action: "route:add", Scope: "corp/eng/*", Effect: Allow},
		{ID: 13, Principal: "role:contractor", Action: "*", Scope: "corp/eng/payroll/**", Effect: Deny},
		{ID: 14, Principal: "role:a", Action: "x:one", Scope: "**", Effect: Allow},
		{ID: 15, Principal: "role:b", Action: "x:two", Scope: "**", Effect: Allow},
	}, Seeds...)
	edges := []Edge{
		{"user:bob", "role:eng"},
		{"user:bob", "role:contractor"},
		{"role:eng", "role:a"},
		{"role:a", "role:b"},
		{"role:b", "role:a"}, // cycle
		{"folder:corp/eng", "role:member"},
		{"user:root", "role:operator"},
		{"user:root", "role:contractor"},
	}
	p := NewPolicy(rows, edges)
	cases := []struct {
		name, principal, action, scope string
		want                           bool
		rule                           int64
	}{
		{"glob allow", "user:alice", "mcp:reply", "corp/eng/sre", true, 10},
		{"glob allow self", "user:alice", "mcp:send", "corp/eng", true, 10},
		{"outside scope", "user:alice", "mcp:reply", "corp/sales", false, 0},
		{"lattice miss", "user:alice", "folder:add", "corp/eng", false, 0},
		{"deny wins over glob allow", "user:alice", "mcp:delegate_group", "corp/eng/secret", false, 11},
		{"deny only on its scope", "user:alice", "mcp:delegate_group", "corp/eng/other", true, 10},
		{"role via membership", "user:bob", "route:add", "corp/eng/sre", true, 12},
		{"role scope * is one level", "user:bob", "route:add", "corp/eng/sre/x", false, 0},
		{"transitive through cycle", "user:bob", "x:two", "any", true, 15},
		{"deny from another role wins", "user:bob", "route:add", "corp/eng/payroll", false, 13},
		{"operator everything", "user:root", "secret:set", "corp", true, 0},
		{"operator denied by its other role", "user:root", "secret:set", "corp/eng/payroll/q1", false, 13},
		{"member self scope", "folder:corp/eng", "mcp:reply", "corp/eng", true, 0},
		{"member not other folder", "folder:corp/eng", "mcp:reply", "corp/eng/sre", false, 0},
		{"member not other verbs", "folder:corp/eng", "mcp:delegate_group", "corp/eng", false, 0},
		{"self scope needs folder principal", "role:member", "mcp:reply", "corp", false, 0},
		{"unknown principal default deny", "user:nobody", "mcp:reply", "corp", false, 0},
		{"empty scope only under **", "user:alice", "mcp:reply", "", false, 0},
	}
	for _, c := range cases {
		d := p.Decide(c.principal, c.action, c.scope)
		if d.Allow != c.want {
			t.Errorf("%s: Decide(%s, %s, %q) = %v (%s), want %v", c.name, c.principal, c.action, c.scope, d.Allow, d.Reason, c.want)
			continue
		}
		if c.rule != 0 && (d.Rule == nil || d.Rule.ID != c.rule) {
			t.Errorf("%s: deciding row = %+v, want id %d", c.name, d.Rule, c.rule)
		}
		if !d.Allow && !errors.Is(d.Err(), ErrDenied) {
			t.Errorf("%s: Err() does not wrap ErrDenied", c.name)
		}
	}
}

func TestClosureCycle(t *testing.T) {
	p := NewPolicy(nil, []Edge{{"role:a", "role:b"}, {"role:b", "role:c"}, {"role:c", "role:a"}, {"role:c", "role:c"}})
	if got := len(p.Closure("role:a")); got != 3 {
		t.Fatalf("closure size = %d, want 3", got)
	}
}

func TestCanGrant(t *testing.T) {
	rows := append([]Grant{
		{ID: 20, Principal: "user:lead", Action: "mcp:*", Scope: "corp/eng/**", Effect: Allow, GrantOption: true},
		{ID: 21, Principal: "user:lead", Action: "route:add", Scope: "corp/**", Effect: Allow},
		{ID: 22, Principal: "user:lead", Action: "mcp:send", Scope: "corp/eng/vault", Effect: Deny},
		{ID: 23, Principal: "user:lead", Action: "shell:env:TOKEN", Scope: "corp/eng/**", Effect: Allow, GrantOption: true, Params: `{"max":1}`},
	}, Seeds...)
	p := NewPolicy(rows, []Edge{{"user:root", "role:operator"}})
	g := func(principal, action, scope string, effect Effect) Grant {
		return Grant{Principal: principal, Action: action, Scope: scope, Effect: effect}
	}
	cases := []struct {
		name    string
		granter string
		grant   Grant
		want    bool
	}{
		{"subset action and scope", "user:lead", g("user:dev", "mcp:reply", "corp/eng/sre", Allow), true},
		{"whole row overlaps own deny", "user:lead", g("user:dev", "mcp:*", "corp/eng/**", Allow), false},
		{"glob overlaps own deny", "user:lead", g("user:dev", "mcp:*", "corp/eng/*", Allow), false},
		{"narrower glob clear of deny", "user:lead", g("user:dev", "mcp:*", "corp/eng/sre/*", Allow), true},
		{"wider scope", "user:lead", g("user:dev", "mcp:reply", "corp/**", Allow), false},
		{"sibling scope", "user:lead", g("user:dev", "mcp:reply", "corp/sales", Allow), false},
		{"wider action", "user:lead", g("user:dev", "*", "corp/eng/sre", Allow), false},
		{"other namespace", "user:lead", g("user:dev", "folder:add", "corp/eng/sre", Allow), false},
		{"held without grant option", "user:lead", g("user:dev", "route:add", "corp/eng", Allow), false},
		{"deny by non-root", "user:lead", g("user:dev", "mcp:reply", "corp/eng/sre", Deny), false},
		{"wildcard principal", "user:lead", g("user:*", "mcp:reply", "corp/eng/sre", Allow), false},
		{"covering own deny", "user:lead", g("user:dev", "mcp:send", "corp/eng/*", Allow), false},
		{"self scope by non-root", "user:lead", g("role:member", "mcp:reply", "{self}", Allow), false},
		{"params must match", "user:lead", Grant{Principal: "user:dev", Action: "shell:env:TOKEN", Scope: "corp/eng", Effect: Allow, Params: `{"max":9}`}, false},
		{"params equal", "user:lead", Grant{Principal: "user:dev", Action: "shell:env:TOKEN", Scope: "corp/eng", Effect: Allow, Params: `{"max":1}`}, true},
		{"root may deny", "user:root", g("user:dev", "mcp:reply", "corp", Deny), true},
		{"root anything", "user:root", g("user:dev", "*", "**", Allow), true},
		{"no rows", "user:dev", g("user:x", "mcp:reply", "corp", Allow), false},
		{"invalid scope", "user:root", g("user:dev", "mcp:reply", "corp/e*", Allow), false},
	}
	for _, c := range cases {
		d := p.CanGrant(c.granter, c.grant)
		if d.Allow != c.want {
			t.Errorf("%s: CanGrant = %v (%s), want %v", c.name, d.Allow, d.Reason, c.want)
		}
	}
}

func TestScopeCovers(t *testing.T) {
	cases := []struct {
		outer, inner string
		want         bool
	}{
		{"**", "a/*/b", true},
		{"a/**", "a", true},
		{"a/**", "a/*", true},
		{"a/**", "a/**", true},
		{"a/*", "a/**", false},
		{"a/*", "a/b", true},
		{"a/b", "a/*", false},
		{"**/x", "a/b/x", true},
		{"**/x", "a/**", false},
	}
	for _, c := range cases {
		if got := ScopeCovers(c.outer, c.inner); got != c.want {
			t.Errorf("ScopeCovers(%q, %q) = %v, want %v", c.outer, c.inner, got, c.want)
		}
	}
}

func TestGateAuditsDenials(t *testing.T) {
	p := NewPolicy(Seeds, []Edge{{"folder:a", "role:member"}})
	var audited []Decision
	g := &Gate{
		Policy: func(context.Context) (*Policy, error) { return p, nil },
		Audit:  func(_ context.Context, d Decision) error { audited = append(audited, d); return nil },
	}
	ctx := context.Background()
	if err := g.Check(ctx, "folder:a", "mcp:reply", "a"); err != nil {
		t.Fatal(err)
	}
	if err := g.Check(ctx, "folder:a", "mcp:reply", "b"); !errors.Is(err, ErrDenied) {
		t.Fatalf("err = %v, want ErrDenied", err)
	}
	if err := g.CheckGrant(ctx, "folder:a", Grant{Principal: "user:x", Action: "mcp:reply", Scope: "a", Effect: Allow}); !errors.Is(err, ErrDenied) {
		t.Fatalf("grant err = %v", err)
	}
	if len(audited) != 2 || audited[0].Scope != "b" || audited[1].Action != "grant:mcp:reply" {
		t.Fatalf("audited = %+v", audited)
	}
}
