package acl

import (
	"fmt"
	"slices"
	"strings"
)

// Actions is every concrete action some caller checks. A grant may name one
// of them, a "<ns>:*" over a namespace they use, "*", or a member of a family
// in ActionFamilies; anything else could never match and is refused.
var Actions = []string{
	"audit:read",
	"adapter:rm", "adapter:set",
	"folder:add", "folder:budget", "folder:read", "folder:rm",
	"grant:member", "grant:read",
	"hook:add", "hook:read", "hook:rm",
	"message:post", "message:read",
	"network:allow", "network:deny", "network:read", "network:rm",
	"observe:read", "observe:rm",
	"outbound:read",
	"route:add", "route:read", "route:rm",
	"schedule:add", "schedule:read", "schedule:rm",
	"secret:read", "secret:rm", "secret:rotate", "secret:set",
	"token:add", "token:read", "token:rm",
	"turn:read",
	"mcp:add_route", "mcp:delegate_group", "mcp:delete_route", "mcp:edit_message", "mcp:escalate_group", "mcp:fork_topic",
	"mcp:list_routes", "mcp:network_allow", "mcp:network_deny", "mcp:network_list", "mcp:observe_group",
	"mcp:register_group", "mcp:reply", "mcp:schedule_task", "mcp:send", "mcp:submit_turn", "mcp:unobserve_group",
}

// ActionFamilies are action prefixes completed by a name the operator picks:
// shell:env:<KEY> passes the folder secret KEY into the agent's environment;
// inject:<KEY>@<host> gives it a placeholder the proxy swaps for the value in
// requests to host (see InjectFamily).
var ActionFamilies = []string{"shell:env:", InjectFamily}

// ValidateKnownAction refuses an action pattern no check could ever match.
func ValidateKnownAction(a string) error {
	if err := ValidateAction(a); err != nil {
		return err
	}
	if a == "*" || slices.Contains(Actions, a) {
		return nil
	}
	if strings.HasPrefix(a, InjectFamily) && a != InjectFamily+"*" {
		return validateInject(a)
	}
	for _, f := range ActionFamilies {
		if strings.HasPrefix(a, f) && len(a) > len(f) && !strings.HasSuffix(a, ":*") {
			return nil
		}
	}
	if ns, ok := strings.CutSuffix(a, ":*"); ok {
		for _, k := range append(slices.Clone(Actions), ActionFamilies...) {
			if strings.HasPrefix(k, ns+":") {
				return nil
			}
		}
	}
	return fmt.Errorf("action %q is not one arizuko checks; known: %s, shell:env:<KEY>, inject:<KEY>@<host>, a namespace with \":*\" or \"*\": %w",
		a, strings.Join(Actions, " "), ErrInvalid)
}
