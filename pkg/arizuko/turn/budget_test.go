package turn

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// A folder past its turn budget gets a quota-exhausted turn: no guest, no
// retry, its message kept, and one notice to the chat. Raising the budget
// lets the next message run.
func TestBudgetExhaustedIsTerminal(t *testing.T) {
	e := newEnv(t, "", "a", "b")
	r := newBlockRunner()
	var woke atomic.Int32
	e.start(t, r, func(o *Options) {
		o.MaxTurnsPerDay = 2
		o.OnOutbound = func() { woke.Add(1) }
	})
	ctx := context.Background()
	for i, text := range []string{"one", "two"} {
		e.post(t, "web:a", text)
		recv(t, r.started)
		r.release <- struct{}{}
		e.waitTurns(t, "a", i+1)
	}
	// The two turns above ended without a reply, each with its notice.
	before := woke.Load()
	over := e.post(t, "web:a", "three")
	ts := e.waitTurns(t, "a", 3)
	select {
	case f := <-r.started:
		t.Fatalf("a guest started for %s past the budget", f)
	case <-time.After(200 * time.Millisecond):
	}
	q := ts[0]
	if q.Status != store.TurnFailed || q.Outcome != OutcomeQuota || q.Attempts != 0 || q.StartedAt != 0 ||
		!strings.Contains(q.Error, "started 2 turns in the last 24h, its budget is 2") {
		t.Fatalf("refused turn %+v", q)
	}
	msgs, err := e.st.TurnMessages(ctx, q)
	if err != nil || len(msgs) != 1 || msgs[0].ID != over.ID || msgs[0].Text != "three" {
		t.Fatalf("refused turn's messages %+v %v", msgs, err)
	}
	outs, err := e.st.TurnOutbound(ctx, q.ID)
	if err != nil || len(outs) != 1 || outs[0].ChatJID != "web:a" || outs[0].Status != "pending" ||
		outs[0].Text != "arizuko: this folder's turn budget is used up (2 per day); try later" {
		t.Fatalf("notice %+v %v", outs, err)
	}
	if n := woke.Load() - before; n != 1 {
		t.Fatalf("delivery woken %d times for the refused turn, want 1", n)
	}

	// Another folder's budget is its own.
	e.post(t, "web:b", "hello b")
	if f := recv(t, r.started); f != "b" {
		t.Fatalf("started %s", f)
	}
	r.release <- struct{}{}
	if bt := e.waitTurns(t, "b", 1); bt[0].Status != store.TurnDone {
		t.Fatalf("b turn %+v", bt[0])
	}

	// The folder's own setting wins over the instance default: 0 = unlimited.
	if err := e.st.SetTurnBudget(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	e.post(t, "web:a", "four")
	recv(t, r.started)
	r.release <- struct{}{}
	if ts := e.waitTurns(t, "a", 4); ts[0].Status != store.TurnDone || ts[0].Outcome == OutcomeQuota {
		t.Fatalf("turn after raising the budget %+v", ts[0])
	}
	// And a folder cap below the instance default holds.
	if err := e.st.SetTurnBudget(ctx, "b", 1); err != nil {
		t.Fatal(err)
	}
	e.post(t, "web:b", "again b")
	if bt := e.waitTurns(t, "b", 2); bt[0].Outcome != OutcomeQuota {
		t.Fatalf("b past its own budget %+v", bt[0])
	}
}

func TestBudgetEffective(t *testing.T) {
	e := newEnv(t, "", "a")
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		instance int
		folder   int // <0: unset
		want     int
	}{
		{"unlimited by default", 0, -1, 0},
		{"instance default", 10, -1, 10},
		{"folder cap", 10, 3, 3},
		{"folder unlimited", 10, 0, 0},
		{"folder cap without default", 0, 7, 7},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := e.st.SetTurnBudget(ctx, "a", c.folder); err != nil {
				t.Fatal(err)
			}
			q := New(Options{Store: e.st, MaxTurnsPerDay: c.instance})
			if got, err := q.Budget(ctx, "a"); err != nil || got != c.want {
				t.Fatalf("Budget = %d, %v; want %d", got, err, c.want)
			}
		})
	}
}
