package store

import (
	"context"
	"testing"
)

// A keyed outbound message is stored once: a turn run again after its runner
// died writes the same (turn, attempt, sequence) key and gets the first row
// back, so delivery sees one message. Unkeyed messages are never merged.
func TestOutboundReplyKey(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		inbound(t, s, Message{ChatJID: "tg:1", Platform: "telegram", Text: "hi", Folder: "a"})
		first, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "answer", TurnID: 7, Key: "7:1:1"})
		if err != nil {
			t.Fatal(err)
		}
		again, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "answer, second run", TurnID: 7, Key: "7:1:1"})
		if err != nil || again.ID != first.ID || again.Text != "answer" {
			t.Fatalf("same key: %+v %v, want the first message %d back", again, err, first.ID)
		}
		next, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "second message", TurnID: 7, Key: "7:1:2"})
		if err != nil || next.ID == first.ID {
			t.Fatalf("next sequence: %+v %v, want a new message", next, err)
		}
		for range 2 {
			if _, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "unkeyed", TurnID: 7}); err != nil {
				t.Fatal(err)
			}
		}
		outs, err := s.TurnOutbound(ctx, 7)
		if err != nil || len(outs) != 4 {
			t.Fatalf("turn outbound %d %v, want 4 (two keyed, two unkeyed)", len(outs), err)
		}
		due, err := s.DueOutbound(ctx, now()+1, 100)
		if err != nil || len(due) != 4 {
			t.Fatalf("due %d %v, want 4", len(due), err)
		}
	})
}
