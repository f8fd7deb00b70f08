package gated

import (
	"encoding/json"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// A tool listing nothing answers an empty JSON list, never null, so an
// agent can iterate over what it gets.
func TestEmptyListsAreLists(t *testing.T) {
	e := newToolEnv(t, "hr")
	e.grant(t, "folder:hr", "mcp:list_routes", "hr", acl.Allow)
	e.grant(t, "folder:hr", "mcp:network_list", "hr", acl.Allow)
	cs := e.connect(t, e.turn)
	if text, isErr := call(t, cs, "list_routes", map[string]any{}); isErr || text != "[]" {
		t.Errorf("list_routes with no route: isErr=%v %q, want []", isErr, text)
	}
	text, isErr := call(t, cs, "network_list", map[string]any{"folder": "hr"})
	var v map[string]any
	if isErr || json.Unmarshal([]byte(text), &v) != nil {
		t.Fatalf("network_list: isErr=%v %q", isErr, text)
	}
	for _, k := range []string{"rules", "effective"} {
		if l, ok := v[k].([]any); !ok || len(l) != 0 {
			t.Errorf("network_list %s = %#v, want []", k, v[k])
		}
	}
}
