package store

import (
	"context"
	"testing"
)

// Whatever bytes reach the store — a hostile guest's output in a turn's error, an
// adapter's message with NUL or broken UTF-8 — are written: no input may make a write
// fail and leave a turn open forever. PostgreSQL text holds neither NUL nor invalid
// UTF-8, so there they read back with U+FFFD in their place.
func TestAnyBytesAreWritten(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		const raw = "nul\x00 bad\xff\xfe end"
		want := raw
		if b.name == "postgres" {
			want = "nul\uFFFD bad\uFFFD end" // a run of bad bytes is one U+FFFD
		}
		m := inbound(t, s, Message{ChatJID: "tg:1", Text: raw, Folder: "a", Sender: raw, PlatformID: raw})
		if _, dup, err := s.PutMessage(ctx, Message{ChatJID: "tg:1", Text: "again", PlatformID: raw}); err != nil || !dup {
			t.Fatalf("repeat of the platform id: dup %v, %v", dup, err)
		}
		turn, err := s.CreateTurn(ctx, "a", "", m, m)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.RequeueTurn(ctx, turn.ID, raw); err != nil {
			t.Fatalf("requeue with the guest's output: %v", err)
		}
		if err := s.SubmitTurn(ctx, turn.ID, raw); err != nil {
			t.Fatalf("submit: %v", err)
		}
		if err := s.FinishTurn(ctx, turn.ID, TurnEnd{Status: TurnFailed, Error: raw, Egress: raw}); err != nil {
			t.Fatalf("finish with the guest's output: %v", err)
		}
		if _, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: raw}); err != nil {
			t.Fatalf("reply: %v", err)
		}
		got, _ := s.GetTurn(ctx, turn.ID)
		if got.Status != TurnFailed || got.Error != want || got.Outcome != want {
			t.Fatalf("turn %+v", got)
		}
		msgs, _ := s.ListMessages(ctx, "tg:1", 0, 10)
		if len(msgs) != 2 || msgs[0].Text != want || msgs[0].Sender != want || msgs[1].Text != want {
			t.Fatalf("messages %+v", msgs)
		}
	})
}
