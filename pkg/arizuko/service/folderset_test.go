package service

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// folder set changes the agent command, merges the environment and turns the
// stdout reply on and off; bad input is refused naming it, and a tenant admin
// changes only folders it may add.
func TestSetFolder(t *testing.T) {
	l, ctx := newLocal(t, nil)
	mustFolders(t, l, ctx, "acme", "globex")
	on, off := true, false
	f, err := l.SetFolder(ctx, "acme", FolderSet{AgentCommand: []string{"claude", "-p"}, SetEnv: []string{"A=1", "B=x=y"}, StdoutReply: &on})
	if err != nil || !slices.Equal(f.AgentCommand, []string{"claude", "-p"}) || !slices.Equal(f.AgentEnv, []string{"A=1", "B=x=y"}) || !f.StdoutReply {
		t.Fatalf("set: %+v %v", f, err)
	}
	f, err = l.SetFolder(ctx, "acme", FolderSet{SetEnv: []string{"A=3", "C="}, UnsetEnv: []string{"B"}, StdoutReply: &off})
	if err != nil || !slices.Equal(f.AgentCommand, []string{"claude", "-p"}) || !slices.Equal(f.AgentEnv, []string{"A=3", "C="}) || f.StdoutReply {
		t.Fatalf("merge: %+v %v", f, err)
	}
	for _, c := range []struct {
		in   FolderSet
		want string
	}{
		{FolderSet{SetEnv: []string{"NOEQUALS"}}, `"NOEQUALS": want KEY=VALUE`},
		{FolderSet{SetEnv: []string{"1X=a"}}, `"1X=a": want KEY=VALUE`},
		{FolderSet{SetEnv: []string{"ARIZUKO_FOLDER=globex"}}, "ARIZUKO_FOLDER: ARIZUKO_* is set by the host"},
		{FolderSet{SetEnv: []string{"A=1", "A=2"}}, "A is set twice"},
		{FolderSet{SetEnv: []string{"A=a\x00b"}}, "NUL"},
		{FolderSet{SetEnv: []string{"A=" + strings.Repeat("v", MaxAgentEnvBytes)}}, "the limit is 4096"},
		{FolderSet{UnsetEnv: []string{"A B"}}, `unset env "A B"`},
	} {
		_, err := l.SetFolder(ctx, "acme", c.in)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want invalid naming %q", c.in, err, c.want)
		}
	}
	if _, err := l.SetFolder(ctx, "nosuch", FolderSet{StdoutReply: &on}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("missing folder: %v", err)
	}
	if _, err := l.AddFolder(ctx, store.Folder{Path: "bad", AgentEnv: []string{"ARIZUKO_TURN=1"}}); !errors.Is(err, ErrInvalid) {
		t.Errorf("folder add with a host variable: %v", err)
	}

	if _, err := l.AddGrant(ctx, acl.Grant{Principal: "user:acme-admin", Action: "folder:add", Scope: "acme", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	admin := WithPrincipal(context.Background(), "user:acme-admin")
	if _, err := l.SetFolder(admin, "acme", FolderSet{SetEnv: []string{"D=4"}}); err != nil {
		t.Errorf("tenant admin on its folder: %v", err)
	}
	if _, err := l.SetFolder(admin, "globex", FolderSet{AgentCommand: []string{"sh", "-c", "evil"}}); Code(err) != CodeDenied {
		t.Errorf("tenant admin on another tenant's folder: %v", err)
	}
	if g, _ := l.st.GetFolder(ctx, "globex"); len(g.AgentCommand) != 0 {
		t.Errorf("globex changed: %+v", g)
	}
}

// A turn's kept output is read with the turn: by whoever may read the
// folder's turns, and by no other tenant.
func TestTurnOutputIsTenantScoped(t *testing.T) {
	l, ctx := newLocal(t, nil)
	mustFolders(t, l, ctx, "acme", "globex")
	ids := map[string]int64{}
	for _, f := range []string{"acme", "globex"} {
		in, err := l.PostMessage(ctx, MessageIn{ChatJID: "web:" + f, Text: "hi", Platform: "test"})
		if err != nil {
			t.Fatal(err)
		}
		tr, err := l.st.CreateTurn(ctx, f, "", in.Message.ID, in.Message.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.st.PutTurnOutput(ctx, tr.ID, store.TurnOutput{Attempt: 1, Output: "output of " + f + "\x00\xff"}); err != nil {
			t.Fatal(err)
		}
		ids[f] = tr.ID
	}
	if _, err := l.AddGrant(ctx, acl.Grant{Principal: "user:acme-ops", Action: "turn:read", Scope: "acme", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	ops := WithPrincipal(context.Background(), "user:acme-ops")
	d, err := l.GetTurn(ops, ids["acme"])
	if err != nil || len(d.Outputs) != 1 || d.Outputs[0].Output != "output of acme\uFFFD" {
		t.Fatalf("acme's own turn: %+v %v", d.Outputs, err)
	}
	if d, err := l.GetTurn(ops, ids["globex"]); Code(err) != CodeDenied || len(d.Outputs) != 0 {
		t.Fatalf("globex's turn: %+v %v, want denied", d.Outputs, err)
	}
}
