package dispatch

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// failingAgent writes a file into the home, then fails for good.
type failingAgent struct{ runs atomic.Int32 }

func (a *failingAgent) Run(_ context.Context, j turn.Job) (turn.Result, error) {
	n := a.runs.Add(1)
	if err := os.WriteFile(filepath.Join(j.HostHome, fmt.Sprintf("run%d", n)), []byte("x"), 0o644); err != nil {
		return turn.Result{Exit: 1}, err
	}
	return turn.Result{Exit: 1}, fmt.Errorf("agent gave up: %w", turn.ErrTerminal)
}

// A terminally failed turn commits nothing of its home, unless the folder
// keeps failed turns' changes.
func TestFailedTurnCommitsNothingUnlessKept(t *testing.T) {
	p := newPlane(t, true, 10*time.Second, nil, nil, "kf")
	agent := &failingAgent{}
	p.runner(t, "admin", nil, agent)
	p.post(t, "kf", "one")
	eventually.True(t, 2*time.Minute, "the failed turn", func() bool { return agent.runs.Load() == 1 && p.idle(t) })
	if l, err := p.setup.Homes.Log(p.ctx, "kf"); err != nil || len(l.Versions) != 0 {
		t.Fatalf("log after a failed turn %+v %v, want no version", l, err)
	}
	p.d.o.KeepFailed = func(f string) bool { return f == "kf" }
	p.post(t, "kf", "two")
	eventually.True(t, 2*time.Minute, "the second failed turn", func() bool { return agent.runs.Load() == 2 && p.idle(t) })
	l, err := p.setup.Homes.Log(p.ctx, "kf")
	if err != nil || len(l.Versions) != 1 {
		t.Fatalf("log %+v %v, want the kept failed turn's version", l, err)
	}
	m, err := p.setup.Homes.Manifest(p.ctx, l.Versions[0])
	if err != nil || len(m.Entries) != 1 || m.Entries[0].Path != "run2" {
		t.Errorf("kept home %+v %v, want run2 alone (run1 was never committed)", m.Entries, err)
	}
}
