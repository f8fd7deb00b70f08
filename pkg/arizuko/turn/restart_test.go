package turn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

const helperEnv = "ARIZUKO_TURN_TEST_DAEMON"

// stuckRunner marks that the agent started, then never finishes.
type stuckRunner struct{ dir string }

func (r stuckRunner) Run(ctx context.Context, j Job) (Result, error) {
	os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("started-%d", j.Turn.ID)), nil, 0o600)
	<-ctx.Done()
	return Result{Exit: 1}, ctx.Err()
}

// daemonHelper is the daemon process of TestKilledDaemonRerunsTurn: that test runs itself
// again with helperEnv set to the data dir, and this serves turns until killed.
func daemonHelper(t *testing.T, data string) {
	ctx := context.Background()
	l, err := service.Open(ctx, service.Options{DataDir: data})
	if err != nil {
		t.Fatal(err)
	}
	g := gated.New(gated.Options{Store: l.Store(), Gate: l.Gate(), Control: l, DataDir: data})
	q := New(Options{Store: l.Store(), Gate: l.Gate(), Control: l, Gated: g, Runner: stuckRunner{data}, DataDir: data, Sweep: 50 * time.Millisecond})
	q.Run(ctx) // until killed
}

// A daemon killed mid-turn loses no accepted message: the next daemon runs
// the cut-off turn again and then the message accepted meanwhile.
func TestKilledDaemonRerunsTurn(t *testing.T) {
	if data := os.Getenv(helperEnv); data != "" {
		daemonHelper(t, data)
		return
	}
	data, err := os.MkdirTemp("", "tk")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	e := newEnv(t, data, "a")
	first := e.post(t, "web:a", "before the crash")

	cmd := exec.Command(os.Args[0], "-test.run=^TestKilledDaemonRerunsTurn$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+data)
	out, _ := os.Create(filepath.Join(data, "daemon.log"))
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	}()
	var turn store.Turn
	if !eventually.Within(30*time.Second, func() bool {
		ts, _ := e.st.ListTurns(context.Background(), "a", 10)
		if len(ts) != 1 {
			return false
		}
		if _, err := os.Stat(filepath.Join(data, fmt.Sprintf("started-%d", ts[0].ID))); err != nil {
			return false
		}
		turn = ts[0]
		return true
	}) {
		b, _ := os.ReadFile(filepath.Join(data, "daemon.log"))
		t.Fatalf("daemon never started the turn; log:\n%s", b)
	}
	second := e.post(t, "web:a", "during the turn")
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	killed = true

	turn, _ = e.st.GetTurn(context.Background(), turn.ID)
	if turn.Status != store.TurnRunning || turn.Attempts != 1 || turn.LastMessage != first.ID {
		t.Fatalf("after the kill turn is %+v", turn)
	}

	e.start(t, hostRunner{}, nil)
	ts := e.waitTurns(t, "a", 2)
	for _, x := range ts {
		if x.Status != store.TurnDone {
			t.Fatalf("turn %+v", x)
		}
	}
	again, _ := e.st.GetTurn(context.Background(), turn.ID)
	if again.Attempts != 2 {
		t.Fatalf("cut-off turn ran %d times, want 2", again.Attempts)
	}
	var replies []string
	for _, x := range []int64{ts[1].ID, ts[0].ID} {
		outs, _ := e.st.TurnOutbound(context.Background(), x)
		for _, o := range outs {
			replies = append(replies, o.Text)
		}
	}
	want := "echo: before the crash|echo: during the turn"
	if got := strings.Join(replies, "|"); got != want {
		t.Fatalf("replies %q, want %q (second message id %d)", got, want, second.ID)
	}
}
