package service

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/crackbox/crackbox/pkg/folder"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/store"
)

// DeleteFolder promises a folder re-created under the same name starts
// clean: the old tenant's home (memory, session state) and its chats must
// not pass to whoever gets the name next.
func TestRecreatedFolderGetsNothingOfTheOldTenant(t *testing.T) {
	l, ctx := newLocal(t, nil)
	mustFolders(t, l, ctx, "users", "users/alice")
	if _, err := l.AddRoute(ctx, router.Route{Seq: 10, Match: "chat_jid=tg:dm:alice", Target: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.PostMessage(ctx, MessageIn{ChatJID: "tg:dm:alice", Platform: "tg", Sender: "alice", Text: "hi"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Store().SetEngagement(ctx, "tg:dm:alice", "users/alice", "", nowMillis()); err != nil {
		t.Fatal(err)
	}
	home, err := folder.Home(l.DataDir(), "users/alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "memory.md"), []byte("alice's bank PIN is 1234"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.RemoveFolder(ctx, "users/alice"); err != nil {
		t.Fatal(err)
	}
	// Someone else gets the name: the operator, register_group, or a
	// {sender} route's first contact.
	if _, err := l.AddFolder(ctx, store.Folder{Path: "users/alice"}); err != nil {
		t.Fatal(err)
	}
	if ents, err := os.ReadDir(home); err != nil || len(ents) != 0 {
		t.Errorf("the re-created folder's home holds %v (%v), want it empty", ents, err)
	}
	old, _ := filepath.Glob(filepath.Join(folder.HomesRoot(l.DataDir()), folder.RemovedHomes, "users%2Falice-*", "memory.md"))
	if len(old) != 1 {
		t.Errorf("the old home was not kept aside: %v", old)
	}
	res, err := l.Resolve(ctx, MessageIn{ChatJID: "tg:dm:alice", Platform: "tg", Sender: "alice", Text: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Folder == "users/alice" {
		t.Errorf("the old tenant's chat reaches the re-created folder: %s", res.Reason)
	}
	if c, _ := l.Store().GetChat(ctx, "tg:dm:alice"); c.EngagedFolder != "" {
		t.Errorf("the old tenant's chat is still engaged with %q", c.EngagedFolder)
	}
}
