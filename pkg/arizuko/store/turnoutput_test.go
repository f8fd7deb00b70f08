package store

import (
	"context"
	"strings"
	"testing"
)

// An attempt's output is kept as its last MaxTurnOutput bytes of valid text,
// once per attempt; an unanswered turn's outcome stands before one the agent
// submitted; a hand-off is seen from its start on.
func TestTurnOutputAndOutcome(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if err := s.InsertFolder(ctx, Folder{Path: "a"}, ""); err != nil {
			t.Fatal(err)
		}
		tr, err := s.CreateTurn(ctx, "a", "", 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		long := strings.Repeat("x", 3*MaxTurnOutput) + "\x00tail\xff"
		for _, o := range []TurnOutput{{Attempt: 1, Output: "first"}, {Attempt: 1, Output: long}, {Attempt: 2, Output: ""}} {
			if err := s.PutTurnOutput(ctx, tr.ID, o); err != nil {
				t.Fatal(err)
			}
		}
		outs, err := s.TurnOutputs(ctx, tr.ID)
		if err != nil || len(outs) != 2 || outs[1].Attempt != 2 || outs[1].Output != "" {
			t.Fatalf("outputs %+v %v", outs, err)
		}
		if o := outs[0].Output; len(o) > MaxTurnOutput+2 || !strings.HasSuffix(o, "xtail\uFFFD") || strings.ContainsRune(o, 0) {
			t.Fatalf("attempt 1 kept %d bytes ending %q", len(o), o[max(0, len(o)-10):])
		}

		if err := s.SubmitTurn(ctx, tr.ID, "done: all good"); err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, tr.ID, TurnEnd{Status: TurnDone, Outcome: "no reply", Override: true}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTurn(ctx, tr.ID); got.Outcome != "no reply (the agent submitted: done: all good)" {
			t.Fatalf("outcome %q", got.Outcome)
		}

		since := now()
		if h, err := s.HandedOff(ctx, "a", since); err != nil || h {
			t.Fatalf("handed off before any hand-off: %v %v", h, err)
		}
		if err := s.InsertFolder(ctx, Folder{Path: "b"}, ""); err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutInternal(ctx, Internal{ChatJID: "web:a", From: "a", To: "b", Text: "go", How: "escalate", Depth: 1}); err != nil {
			t.Fatal(err)
		}
		if h, err := s.HandedOff(ctx, "a", since); err != nil || !h {
			t.Fatalf("escalation not seen: %v %v", h, err)
		}
		if h, _ := s.HandedOff(ctx, "b", since); h {
			t.Fatal("b never handed off")
		}
	})
}
