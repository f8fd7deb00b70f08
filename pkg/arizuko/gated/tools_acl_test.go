package gated

import (
	"slices"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// Every tool's action is one acl accepts in a grant.
func TestToolActionsKnown(t *testing.T) {
	for _, tl := range Tools {
		if !slices.Contains(acl.Actions, "mcp:"+tl) {
			t.Errorf("acl.Actions lacks mcp:%s", tl)
		}
	}
}
