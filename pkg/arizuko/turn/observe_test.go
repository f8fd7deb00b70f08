package turn

import (
	"context"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
)

// An observation is used only while the grant that allowed it holds: after
// the allow is removed, and after it returns beside a deny, acme's prompts
// carry none of globex's messages.
func TestObservationEndsWithItsGrant(t *testing.T) {
	e := newEnv(t, "", "acme", "globex")
	ctx := context.Background()
	e.start(t, hostRunner{}, nil)
	e.post(t, "web:globex", "globex secret plans")
	e.waitTurns(t, "globex", 1)
	g, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:acme", Action: "mcp:observe_group", Scope: "globex", Effect: acl.Allow})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.st.AddObserver(ctx, "acme", "globex"); err != nil {
		t.Fatal(err)
	}
	reply := func(n int, text string) string {
		t.Helper()
		e.post(t, "web:acme", text)
		ts := e.waitTurns(t, "acme", n)
		outs, err := e.st.TurnOutbound(ctx, ts[0].ID)
		if err != nil || len(outs) != 1 {
			t.Fatalf("outbound %+v %v", outs, err)
		}
		return outs[0].Text
	}
	if got := reply(1, "one"); got != "echo: one [observed globex:2]" {
		t.Fatalf("with the grant: %q", got)
	}
	if err := e.l.RemoveGrant(e.ctx, g.ID); err != nil {
		t.Fatal(err)
	}
	if got := reply(2, "two"); got != "echo: two" {
		t.Fatalf("after the allow was removed: %q", got)
	}
	for _, eff := range []acl.Effect{acl.Allow, acl.Deny} {
		if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:acme", Action: "mcp:observe_group", Scope: "globex", Effect: eff}); err != nil {
			t.Fatal(err)
		}
	}
	if got := reply(3, "three"); got != "echo: three" {
		t.Fatalf("under a deny: %q", got)
	}
}
