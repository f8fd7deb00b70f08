package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func outIDs(os []Outbound) []int64 {
	out := []int64{}
	for _, o := range os {
		out = append(out, o.ID)
	}
	return out
}

// Delivery's view: a reply goes to the platform the chat came from (or the jid names),
// is due at once, and retries, gives up or is sent exactly once.
func TestOutboundDelivery(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		inbound(t, s, Message{ChatJID: "tg:1", Platform: "telegram", Text: "hi", Folder: "a"})
		if at, err := s.NextOutboundAt(ctx); err != nil || at != 0 {
			t.Fatalf("next with nothing pending = %d %v", at, err)
		}
		o1, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "reply", TurnID: 7})
		if err != nil || o1.Platform != "telegram" || o1.Status != "pending" {
			t.Fatalf("reply %+v %v, want the chat's platform", o1, err)
		}
		o2, err := s.PutOutbound(ctx, Outbound{ChatJID: "mail:bob", Folder: "a", Text: "new chat"})
		if err != nil || o2.Platform != "mail" {
			t.Fatalf("to a new chat %+v %v, want the jid's platform", o2, err)
		}
		if _, err := s.GetChat(ctx, "mail:bob"); err != nil {
			t.Fatalf("chat first named by an agent not created: %v", err)
		}
		if at, _ := s.NextOutboundAt(ctx); at != o1.NextAttemptAt {
			t.Fatalf("next = %d, want %d", at, o1.NextAttemptAt)
		}
		due, err := s.DueOutbound(ctx, o2.NextAttemptAt, 0)
		if err != nil || !reflect.DeepEqual(outIDs(due), []int64{o1.ID, o2.ID}) {
			t.Fatalf("due %v %v", outIDs(due), err)
		}
		if due, _ := s.DueOutbound(ctx, o1.NextAttemptAt-1, 0); len(due) != 0 {
			t.Fatalf("due before its time: %v", outIDs(due))
		}

		// o1 fails once and waits; o2 is sent.
		later := o2.NextAttemptAt + 60_000
		if err := s.MarkAttempt(ctx, o1.ID, later, false); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkSent(ctx, o2.ID); err != nil {
			t.Fatal(err)
		}
		if err := s.MarkSent(ctx, o2.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("second MarkSent: %v, want ErrNotFound (sent once)", err)
		}
		if due, _ := s.DueOutbound(ctx, later-1, 0); len(due) != 0 {
			t.Fatalf("due during backoff: %v", outIDs(due))
		}
		if at, _ := s.NextOutboundAt(ctx); at != later {
			t.Fatalf("next = %d, want %d", at, later)
		}
		if err := s.MarkAttempt(ctx, o1.ID, later, true); err != nil {
			t.Fatal(err)
		}
		got, err := s.GetOutbound(ctx, o1.ID)
		if err != nil || got.Status != "failed" || got.Attempts != 2 {
			t.Fatalf("given up %+v %v", got, err)
		}
		if err := s.MarkAttempt(ctx, o1.ID, later, false); !errors.Is(err, ErrNotFound) {
			t.Fatalf("attempt on a failed message: %v, want ErrNotFound", err)
		}
		if got, _ := s.GetOutbound(ctx, o2.ID); got.Status != "sent" || got.Attempts != 1 {
			t.Fatalf("sent %+v", got)
		}
		if at, _ := s.NextOutboundAt(ctx); at != 0 {
			t.Fatalf("next with nothing pending = %d", at)
		}
		if outs, _ := s.TurnOutbound(ctx, 7); !reflect.DeepEqual(outIDs(outs), []int64{o1.ID}) {
			t.Fatalf("turn 7 sent %v", outIDs(outs))
		}
	})
}

func TestOutboundIsNotInbound(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		in := inbound(t, s, Message{ChatJID: "tg:1", Text: "hi"})
		if _, err := s.GetOutbound(ctx, in); !errors.Is(err, ErrNotFound) {
			t.Fatalf("an inbound id read as outbound: %v", err)
		}
		if err := s.MarkSent(ctx, in); !errors.Is(err, ErrNotFound) {
			t.Fatalf("MarkSent on an inbound message: %v", err)
		}
	})
}

// The prompt's recent history: both directions and observed rows, newest limit, oldest
// first.
func TestRecentFolderMessages(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a", "b")
		inbound(t, s, Message{ChatJID: "tg:1", Text: "old", Folder: "a"})
		m2 := inbound(t, s, Message{ChatJID: "tg:1", Text: "seen", Folder: "a", How: "observe"})
		o, _ := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "said"})
		inbound(t, s, Message{ChatJID: "tg:1", Text: "elsewhere", Folder: "b"})
		got, err := s.RecentFolderMessages(ctx, "a", 2)
		if err != nil || !reflect.DeepEqual(ids(got), []int64{m2, o.ID}) || got[1].Direction != "out" {
			t.Fatalf("recent %+v %v", got, err)
		}
	})
}

// The adapter that last spoke in a chat hears the reply.
func TestSetChatPlatform(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		inbound(t, s, Message{ChatJID: "c", Platform: "web", Text: "hi"})
		if err := s.SetChatPlatform(ctx, "c", "tg"); err != nil {
			t.Fatal(err)
		}
		o, err := s.PutOutbound(ctx, Outbound{ChatJID: "c", Text: "x"})
		if err != nil || o.Platform != "tg" {
			t.Fatalf("reply platform %q %v, want tg", o.Platform, err)
		}
	})
}
