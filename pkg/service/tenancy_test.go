package service

import (
	"errors"
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

// A chat jid with a space or control character is a different chat from the
// one a route written for it matches, so no endpoint takes one.
func TestChatJIDWithSpaceOrControlRefused(t *testing.T) {
	l, ctx := newLocal(t, nil)
	for _, jid := range []string{"slack:G1\n", "slack:G1 ", "\tslack:G1", "slack:G\x001", "slack:G1\u00a0", "slack:G1\u2028", "slack:G=1", "slack:G1\x7f"} {
		if err := ValidChatJID(jid); !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidChatJID(%q) = %v", jid, err)
		}
		if _, err := l.PostMessage(ctx, MessageIn{ChatJID: jid, Platform: "slack", Text: "hi"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("PostMessage(%q) = %v", jid, err)
		}
	}
	for _, jid := range []string{"slack:G1", "tg:dm:42", "mail:a@b.example", "irc:#chan", "web:corp/eng#x", "matrix:!room:example.org"} {
		if err := ValidChatJID(jid); err != nil {
			t.Errorf("ValidChatJID(%q) = %v", jid, err)
		}
	}
}
