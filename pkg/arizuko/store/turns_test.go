package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// folders creates folders in order, each under the folder its path names.
func folders(t *testing.T, s *Store, paths ...string) {
	t.Helper()
	for _, p := range paths {
		parent := ""
		if i := strings.LastIndexByte(p, '/'); i >= 0 {
			parent = p[:i]
		}
		if err := s.InsertFolder(context.Background(), Folder{Path: p}, parent); err != nil {
			t.Fatal(err)
		}
	}
}

func inbound(t *testing.T, s *Store, m Message) int64 {
	t.Helper()
	got, _, err := s.PutMessage(context.Background(), m)
	if err != nil {
		t.Fatal(err)
	}
	return got.ID
}

func ids(ms []Message) []int64 {
	out := []int64{}
	for _, m := range ms {
		out = append(out, m.ID)
	}
	return out
}

// The queue's view: what a folder still has to answer, which (folder, topic) pairs have
// work, and a turn claiming messages takes them out of both.
func TestPendingInboundAndWork(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a", "b")
		m1 := inbound(t, s, Message{ChatJID: "tg:1", Text: "one", Folder: "a"})
		inbound(t, s, Message{ChatJID: "tg:1", Text: "watched", Folder: "a", How: "observe"})
		m3 := inbound(t, s, Message{ChatJID: "tg:1", Text: "topic", Folder: "a", Topic: "t"})
		if _, err := s.PutOutbound(ctx, Outbound{ChatJID: "tg:1", Folder: "a", Text: "out"}); err != nil {
			t.Fatal(err)
		}
		m4 := inbound(t, s, Message{ChatJID: "tg:1", Text: "two", Folder: "a"})
		inbound(t, s, Message{ChatJID: "tg:9", Text: "unrouted"})

		got, err := s.PendingInbound(ctx, "a", "", 0)
		if err != nil || !reflect.DeepEqual(ids(got), []int64{m1, m4}) {
			t.Fatalf("pending a = %v %v; want %d and %d (no observe, other topic or outbound rows)", ids(got), err, m1, m4)
		}
		if got, _ := s.PendingInbound(ctx, "a", "", 1); !reflect.DeepEqual(ids(got), []int64{m1}) {
			t.Fatalf("limit 1: %v", ids(got))
		}
		work, err := s.PendingWork(ctx)
		if want := []WorkKey{{"a", ""}, {"a", "t"}}; err != nil || !reflect.DeepEqual(work, want) {
			t.Fatalf("work %v %v, want %v", work, err, want)
		}

		turn, err := s.CreateTurn(ctx, "a", "", m1, m4)
		if err != nil || turn.Status != TurnQueued || turn.FirstMessage != m1 || turn.LastMessage != m4 {
			t.Fatalf("turn %+v %v", turn, err)
		}
		if got, _ := s.PendingInbound(ctx, "a", "", 0); len(got) != 0 {
			t.Fatalf("claimed messages still pending: %v", ids(got))
		}
		// The open turn itself is work until it ends.
		if work, _ := s.PendingWork(ctx); !reflect.DeepEqual(work, []WorkKey{{"a", ""}, {"a", "t"}}) {
			t.Fatalf("work with an open turn %v", work)
		}
		msgs, err := s.TurnMessages(ctx, turn)
		if err != nil || !reflect.DeepEqual(ids(msgs), []int64{m1, m4}) {
			t.Fatalf("turn messages %v %v", ids(msgs), err)
		}
		if err := s.FinishTurn(ctx, turn.ID, TurnEnd{Status: TurnDone}); err != nil {
			t.Fatal(err)
		}
		if work, _ := s.PendingWork(ctx); !reflect.DeepEqual(work, []WorkKey{{"a", "t"}}) {
			t.Fatalf("work after the turn %v", work)
		}
		if got, _ := s.PendingInbound(ctx, "a", "t", 0); !reflect.DeepEqual(ids(got), []int64{m3}) {
			t.Fatalf("topic t pending %v, want %d", ids(got), m3)
		}
	})
}

// A turn's depth is the deepest delegation among its messages: the agent cannot reset
// the chain by answering in a new turn.
func TestCreateTurnCarriesDepth(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		m1 := inbound(t, s, Message{ChatJID: "tg:1", Text: "user", Folder: "a"})
		id, err := s.PutInternal(ctx, Internal{ChatJID: "tg:1", From: "p", To: "a", Text: "do it", How: "delegate", Depth: 3})
		if err != nil {
			t.Fatal(err)
		}
		msgs, _ := s.PendingInbound(ctx, "a", "", 0)
		if len(msgs) != 2 || msgs[1].ID != id || msgs[1].Sender != "folder:p" || msgs[1].How != "delegate" {
			t.Fatalf("internal message %+v", msgs)
		}
		turn, err := s.CreateTurn(ctx, "a", "", m1, id)
		if err != nil || turn.Depth != 3 {
			t.Fatalf("turn %+v %v, want depth 3", turn, err)
		}
	})
}

// A turn runs, fails, is retried and finishes; the agent's own outcome wins over the
// host's; the chat cursor moves past the answered messages only.
func TestTurnLifecycle(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		m1 := inbound(t, s, Message{ChatJID: "tg:1", Text: "q", Folder: "a"})
		m2 := inbound(t, s, Message{ChatJID: "tg:1", Text: "later", Folder: "a"})
		turn, _ := s.CreateTurn(ctx, "a", "", m1, m1)

		if err := s.StartTurn(ctx, turn.ID, "sess-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.RequeueTurn(ctx, turn.ID, "guest crashed"); err != nil {
			t.Fatal(err)
		}
		got, _ := s.GetTurn(ctx, turn.ID)
		if got.Status != TurnQueued || got.Attempts != 1 || got.Error != "guest crashed" || got.SessionID != "sess-1" {
			t.Fatalf("requeued %+v", got)
		}
		if open, _ := s.OpenTurns(ctx, "a"); len(open) != 1 || open[0].ID != turn.ID {
			t.Fatalf("open turns %+v", open)
		}
		if err := s.StartTurn(ctx, turn.ID, "sess-1"); err != nil {
			t.Fatal(err)
		}
		if err := s.SubmitTurn(ctx, turn.ID, "ok: answered"); err != nil {
			t.Fatal(err)
		}
		exit := 0
		if err := s.FinishTurn(ctx, turn.ID, TurnEnd{Status: TurnDone, Outcome: "exit 0", ExitCode: &exit, Egress: "1 allowed"}); err != nil {
			t.Fatal(err)
		}
		got, _ = s.GetTurn(ctx, turn.ID)
		if got.Status != TurnDone || got.Attempts != 2 || got.Outcome != "ok: answered" || got.ExitCode == nil || *got.ExitCode != 0 ||
			got.Egress != "1 allowed" || got.StartedAt == 0 || got.EndedAt < got.StartedAt {
			t.Fatalf("finished %+v", got)
		}
		if open, _ := s.OpenTurns(ctx, "a"); len(open) != 0 {
			t.Fatalf("open after finish %+v", open)
		}
		if c, _ := s.GetChat(ctx, "tg:1"); c.AgentCursor != m1 {
			t.Fatalf("cursor %d, want %d (not %d, which no turn answered)", c.AgentCursor, m1, m2)
		}

		// The host's outcome stands when the agent submitted none.
		t2, _ := s.CreateTurn(ctx, "a", "", m2, m2)
		if err := s.FinishTurn(ctx, t2.ID, TurnEnd{Status: TurnFailed, Outcome: "exit 1", Error: "boom"}); err != nil {
			t.Fatal(err)
		}
		if got, _ := s.GetTurn(ctx, t2.ID); got.Outcome != "exit 1" || got.ExitCode != nil || got.Status != TurnFailed {
			t.Fatalf("host outcome %+v", got)
		}
		if ts, _ := s.ListTurns(ctx, "a", 1); len(ts) != 1 || ts[0].ID != t2.ID {
			t.Fatalf("newest turn %+v", ts)
		}
		if ts, _ := s.ListTurns(ctx, "", 0); len(ts) != 2 {
			t.Fatalf("all turns %+v", ts)
		}
	})
}

func TestTurnErrors(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		for name, err := range map[string]error{
			"get":     func() error { _, err := s.GetTurn(ctx, 99); return err }(),
			"start":   s.StartTurn(ctx, 99, "x"),
			"requeue": s.RequeueTurn(ctx, 99, "x"),
			"submit":  s.SubmitTurn(ctx, 99, "x"),
			"finish":  s.FinishTurn(ctx, 99, TurnEnd{Status: TurnDone}),
		} {
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("%s of a missing turn: %v, want ErrNotFound", name, err)
			}
		}
		if err := s.FinishTurn(ctx, 1, TurnEnd{Status: TurnRunning}); err == nil || errors.Is(err, ErrNotFound) {
			t.Errorf("finish as running: %v, want a status error", err)
		}
	})
}
