package turn

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// A turn that fails for good tells its chat once, and its record keeps the
// agent's real exit code.
func TestFailedTurnNoticesChatOnce(t *testing.T) {
	e := newEnv(t, "", "a")
	r := newBlockRunner()
	r.exits = []int{3, 3}
	e.start(t, r, func(o *Options) { o.MaxRetries = 1 })
	e.post(t, "web:a", "hi")
	for range 2 {
		recv(t, r.started)
		r.release <- struct{}{}
	}
	ts := e.waitTurns(t, "a", 1)
	if x := ts[0]; x.Status != store.TurnFailed || x.ExitCode == nil || *x.ExitCode != 3 {
		t.Fatalf("turn %+v", x)
	}
	outs, err := e.st.TurnOutbound(context.Background(), ts[0].ID)
	if err != nil || len(outs) != 1 || outs[0].ChatJID != "web:a" || !strings.Contains(outs[0].Text, "a could not answer") {
		t.Fatalf("notices %+v %v", outs, err)
	}
}

// A folder removed while its turn waits: the turn fails without a guest and
// the chat hears why.
func TestRemovedFolderTurnNotices(t *testing.T) {
	e := newEnv(t, "", "a")
	in := e.post(t, "web:a", "hi")
	tr, err := e.st.CreateTurn(context.Background(), "a", "", in.ID, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.l.RemoveFolder(e.ctx, "a"); err != nil {
		t.Fatal(err)
	}
	r := newBlockRunner()
	e.start(t, r, nil)
	ts := e.waitTurns(t, "a", 1)
	if x := ts[0]; x.ID != tr.ID || x.Status != store.TurnFailed || x.ExitCode != nil {
		t.Fatalf("turn %+v", x)
	}
	outs, _ := e.st.TurnOutbound(context.Background(), tr.ID)
	if len(outs) != 1 || !strings.Contains(outs[0].Text, "could not answer") {
		t.Fatalf("notices %+v", outs)
	}
}
