package gated

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// A folder edits only messages it sent itself: another folder's message, or
// one that does not exist, is refused and nothing is queued.
func TestEditMessageOnlyOwn(t *testing.T) {
	f := newFixture(t, "acme", "globex")
	ctx := context.Background()
	theirs, err := f.st.PutOutbound(ctx, store.Outbound{ChatJID: "tg:9", Platform: "tg", Folder: "globex", Text: "globex's", TurnID: 50})
	if err != nil {
		t.Fatal(err)
	}
	f.grant(t, "folder:acme", "mcp:edit_message", "acme", acl.Allow)
	cs := f.connect(t, Turn{Folder: "acme", TurnID: 7, ChatJID: "tg:1"})
	for _, id := range []int64{theirs.ID, 12345} {
		text, isErr := call(t, cs, "edit_message", map[string]any{"id": id, "text": "defaced"})
		if !isErr || !strings.Contains(text, "not one acme sent") {
			t.Fatalf("edit of message %d: isErr=%v %q, want a refusal", id, isErr, text)
		}
	}
	if outs, _ := f.st.TurnOutbound(ctx, 7); len(outs) != 0 {
		t.Fatalf("refused edits queued %+v", outs)
	}
}
