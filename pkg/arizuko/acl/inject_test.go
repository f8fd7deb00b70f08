package acl

import (
	"errors"
	"reflect"
	"testing"
)

func TestValidateInjectAction(t *testing.T) {
	cases := []struct {
		action string
		ok     bool
	}{
		{"inject:ANTHROPIC_API_KEY@api.anthropic.com", true},
		{"inject:gh_token@api.github.com", true},
		{"inject:*", true},
		{"inject:KEY", false},
		{"inject:KEY@", false},
		{"inject:@api.example.com", false},
		{"inject:9KEY@api.example.com", false},
		{"inject:KEY@*.example.com", false},
		{"inject:KEY@api.example.com:443", false},
		{"inject:KEY@10.0.0.1", false},
		{"inject:KEY@localhost", false},
		{"inject:KEY@API.example.com", false},
		{"inject:KEY@a..b", false},
		{"inject:KEY@-a.b", false},
		{"inject:K-EY@api.example.com", false},
		{"inject:KEY@api.example.com,other.com", false},
		{"shell:env:KEY@api.example.com", false}, // '@' belongs to inject alone
	}
	for _, c := range cases {
		err := ValidateKnownAction(c.action)
		if (err == nil) != c.ok {
			t.Errorf("ValidateKnownAction(%q) = %v, want ok=%v", c.action, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("%q: error %v does not wrap ErrInvalid", c.action, err)
		}
	}
}

func TestInjections(t *testing.T) {
	rows := []Grant{
		{ID: 1, Principal: "folder:a", Action: "inject:K@api.one.test", Scope: "a", Effect: Allow},
		{ID: 2, Principal: "role:llm", Action: "inject:K@api.two.test", Scope: "{self}", Effect: Allow},
		{ID: 3, Principal: "folder:a", Action: "inject:OTHER@x.test", Scope: "b", Effect: Allow}, // another scope
		{ID: 4, Principal: "folder:a", Action: "inject:GONE@x.test", Scope: "a", Effect: Allow},  // denied below
		{ID: 5, Principal: "folder:a", Action: "inject:GONE@x.test", Scope: "**", Effect: Deny},
		{ID: 6, Principal: "folder:b", Action: "inject:K@api.one.test", Scope: "a", Effect: Allow}, // another principal
		{ID: 7, Principal: "folder:a", Action: "shell:env:K", Scope: "a", Effect: Allow},           // not an injection
		{ID: 8, Principal: "folder:c", Action: "inject:*", Scope: "**", Effect: Allow},             // names no host
		{ID: 9, Principal: "folder:d", Action: "inject:K@api.one.test", Scope: "d", Effect: Allow}, // ...
		{ID: 10, Principal: "folder:d", Action: "inject:*", Scope: "d", Effect: Deny},              // ...withdrawn
	}
	p := NewPolicy(rows, []Edge{{Member: "folder:a", Role: "role:llm"}})
	for _, c := range []struct {
		folder string
		want   map[string][]string
	}{
		{"a", map[string][]string{"K": {"api.one.test", "api.two.test"}}},
		{"b", map[string][]string{}},
		{"c", map[string][]string{}},
		{"d", map[string][]string{}},
	} {
		if got := p.Injections("folder:"+c.folder, c.folder); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Injections(%s) = %v, want %v", c.folder, got, c.want)
		}
	}
}
