package gated

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// One turn's register_group in a loop stops at the tenant's folder limit
// with an error saying so, and nothing past the limit is made.
func TestRegisterGroupFloodStopsAtLimit(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{Limits: service.Limits{Folders: 5}})
	e.AddFolder(t, "corp", "agent")
	f := &fixture{l: e.L, st: e.Store, data: e.Data, ctx: e.Admin}
	f.srv = New(Options{Store: e.Store, Gate: e.L.Gate(), Control: e.L, DataDir: e.Data})
	f.grant(t, "folder:corp", "mcp:register_group", "corp/**", acl.Allow)
	ctx := context.Background()
	m, _, err := e.Store.PutMessage(ctx, store.Message{ChatJID: "irc:corp", Platform: "irc", Text: "hi", Folder: "corp"})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := e.Store.CreateTurn(ctx, "corp", "", m.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	cs := f.connect(t, Turn{Folder: "corp", TurnID: tr.ID, ChatJID: "irc:corp"})
	made := 0
	var last string
	for i := 0; i < 20; i++ {
		text, isErr := call(t, cs, "register_group", map[string]any{"folder": fmt.Sprintf("corp/g%d", i), "chat_jid": fmt.Sprintf("irc:g%d", i)})
		if isErr {
			last = text
			break
		}
		made++
	}
	if made != 4 || !strings.Contains(last, "corp holds its limit of 5 folders") {
		t.Fatalf("made %d folders, then %q; want 4 and the limit named", made, last)
	}
	fs, _ := e.Store.ListFolders(ctx)
	if len(fs) != 5 {
		t.Fatalf("%d folders, want 5", len(fs))
	}
}
