package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// markerAgent holds a per-folder lock while its turn runs, in every process
// it starts: a second live turn of the folder anywhere in the fleet (or a
// leftover process of a stopped one) makes flock fail, and that is noted.
const markerAgent = `exec 9>"$LIVE/$ARIZUKO_FOLDER.lock"
flock -n 9 || echo "$ARIZUKO_FOLDER $ARIZUKO_TURN" >> "$LIVE/overlap"
echo "$ARIZUKO_FOLDER $ARIZUKO_TURN $HOME" >> "$LIVE/ran"
sleep 0.3
exec python3 "$AGENT"`

// converse sends rounds messages to each folder, one at a time per folder
// (the next after the last one's reply), all folders at once.
func (f *fleetEnv) converse(folders []string, from, rounds int) {
	f.t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(folders))
	for _, name := range folders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := from; i < from+rounds; i++ {
				f.say(name, fmt.Sprintf("%s-%d", name, i))
				if !eventually.Within(90*time.Second, func() bool { return len(f.replies(name)) >= i+1 }) {
					errs <- fmt.Errorf("%s: no reply to message %d", name, i)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		f.t.Fatal(err)
	}
}

// checkAnswered wants each folder's chat to hold exactly one reply per message.
func (f *fleetEnv) checkAnswered(folders []string, n int) {
	f.t.Helper()
	for _, name := range folders {
		got := map[string]int{}
		for _, m := range f.replies(name) {
			got[m.Text]++
		}
		for i := 0; i < n; i++ {
			if w := fmt.Sprintf("echo: %s-%d", name, i); got[w] != 1 {
				f.t.Errorf("%s: reply %q %d times, want once (replies %v)", name, w, got[w], got)
			}
		}
		if len(got) != n {
			f.t.Errorf("%s: %d distinct replies, want %d: %v", name, len(got), n, got)
		}
	}
}

// Two runners, five folders: every message is answered once, no folder ever
// has two live turns (from the agents' markers and the lease history), and
// both runners run turns.
func TestFleetTwoRunnersFiveFolders(t *testing.T) {
	twoRunnersFiveFolders(t, newFleet, func(f *fleetEnv, i int, name string) { f.startRunner(name, f.runnerToken(name), 3) })
}

// twoRunnersFiveFolders runs the two-runner check on the fleet newF makes,
// start starting runner i (0 or 1) under name.
func twoRunnersFiveFolders(t *testing.T, newF func(*testing.T, map[string]string) *fleetEnv, start func(f *fleetEnv, i int, name string)) {
	scripts := map[string]string{}
	var folders []string
	for i := 1; i <= 5; i++ {
		name := fmt.Sprintf("f%d", i)
		scripts[name] = markerAgent
		folders = append(folders, name)
	}
	f := newF(t, scripts)
	hist := f.recordLeases()
	start(f, 0, "r1")
	start(f, 1, "r2")
	// A runner slow to start on a loaded machine would leave every turn to the other.
	f.waitPulling("r1", "r2")
	f.converse(folders, 0, 3)
	f.checkAnswered(folders, 3)
	if o := f.lines("overlap"); len(o) > 0 {
		t.Errorf("two live turns of one folder: %v", o)
	}
	h := hist()
	if len(h) < 15 {
		t.Errorf("lease history has %d events for 15 turns", len(h))
	}
	if bad := overlaps(h); len(bad) > 0 {
		t.Errorf("lease history shows overlapping holders:\n%s", strings.Join(bad, "\n"))
	}
	by := map[string]int{}
	for _, l := range f.lines("ran") {
		for _, r := range []string{"/r1/", "/r2/"} {
			if strings.Contains(l, r) {
				by[r]++
			}
		}
	}
	if by["/r1/"] == 0 || by["/r2/"] == 0 {
		t.Errorf("turns per runner %v: want both to run turns", by)
	}
	t.Logf("turns per runner %v, %d lease events", by, len(h))
}

// One NATS node of three stops: dispatch goes on on the other two.
func TestFleetSurvivesNATSNodeLoss(t *testing.T) {
	scripts := map[string]string{"n1": markerAgent, "n2": markerAgent, "n3": markerAgent}
	folders := []string{"n1", "n2", "n3"}
	f := newFleet(t, scripts)
	f.startRunner("r1", f.runnerToken("r1"), 2)
	f.startRunner("r2", f.runnerToken("r2"), 2)
	f.converse(folders, 0, 1)
	f.nats.StopNode(0)
	f.converse(folders, 1, 2)
	f.checkAnswered(folders, 3)
	if o := f.lines("overlap"); len(o) > 0 {
		t.Errorf("two live turns of one folder: %v", o)
	}
}

// A runner SIGKILLed after its agent replied, mid-turn: the turn runs again
// on the other runner once the lease lapses, and the chat still gets exactly
// one reply, because the re-run's reply carries the same (turn, attempt,
// sequence) key.
func TestFleetRunnerKilledMidTurn(t *testing.T) {
	f := newFleet(t, map[string]string{"k": `echo "$ARIZUKO_TURN $HOME" >> "$LIVE/ran"
python3 "$AGENT" || exit $?
echo "$HOME" >> "$LIVE/replied"
sleep 4`})
	rs := []*runnerProc{f.startRunner("r1", f.runnerToken("r1"), 1), f.startRunner("r2", f.runnerToken("r2"), 1)}
	f.say("k", "hello")
	f.waitFor(60*time.Second, "the first run's reply", func() bool { return len(f.lines("replied")) == 1 })
	first := f.lines("replied")[0]
	var victim, other *runnerProc
	for i, r := range rs {
		if strings.Contains(first, "/"+r.name+"/") {
			victim, other = r, rs[1-i]
		}
	}
	if victim == nil {
		t.Fatalf("reply from an unknown runner: %q", first)
	}
	killed := time.Now()
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done
	f.waitFor(90*time.Second, "the turn to finish on the other runner", func() bool {
		ts, err := f.client.ListTurns(service.WithPrincipal(context.Background(), service.AdminPrincipal), "k", 10)
		return err == nil && len(ts) == 1 && ts[0].Status == store.TurnDone
	})
	t.Logf("turn finished %s after the kill (lease ttl %s)", time.Since(killed).Round(time.Millisecond), fleetLeaseTTL)
	ran := f.lines("ran")
	if len(ran) != 2 || !strings.Contains(ran[1], "/"+other.name+"/") {
		t.Fatalf("runs %q: want the second on %s", ran, other.name)
	}
	if rep := f.replies("k"); len(rep) != 1 || rep[0].Text != "echo: hello" {
		t.Fatalf("chat got %d replies %+v, want exactly one", len(rep), rep)
	}
}

// The control plane is SIGKILLed and started again while messages keep
// coming: every message it acknowledged is answered by a finished turn.
func TestFleetControlPlaneRestartUnderLoad(t *testing.T) {
	scripts := map[string]string{}
	folders := []string{"c1", "c2", "c3"}
	for _, n := range folders {
		scripts[n] = `sleep 0.2; exec python3 "$AGENT"`
	}
	f := newFleet(t, scripts)
	f.startRunner("r1", f.runnerToken("r1"), 2)
	f.startRunner("r2", f.runnerToken("r2"), 2)
	var mu sync.Mutex
	acked := map[string][]int64{}
	var sent sync.WaitGroup
	for _, n := range folders {
		sent.Add(1)
		go func() {
			defer sent.Done()
			ctx := service.WithPrincipal(context.Background(), service.AdminPrincipal)
			for i := 0; i < 25; i++ {
				in, err := f.client.PostMessage(ctx, service.MessageIn{ChatJID: "web:" + n, Sender: "tester", Text: fmt.Sprintf("%s-%d", n, i)})
				if err == nil {
					mu.Lock()
					acked[n] = append(acked[n], in.Message.ID)
					mu.Unlock()
				}
				time.Sleep(100 * time.Millisecond) // spread the sends so the crash lands amid them
			}
		}()
	}
	// Crash the control plane once every folder has some messages stored and more to come.
	eventually.True(t, time.Minute, "some messages of every folder acked", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, n := range folders {
			if len(acked[n]) < 3 {
				return false
			}
		}
		return true
	})
	f.stopCP(syscall.SIGKILL)
	f.startCP()
	sent.Wait()
	total := 0
	for _, n := range folders {
		total += len(acked[n])
		f.waitFor(120*time.Second, "every acknowledged message of "+n+" answered", func() bool {
			return len(unanswered(f, n, acked[n])) == 0
		})
	}
	if total < 20 {
		t.Fatalf("only %d messages acknowledged", total)
	}
	t.Logf("%d messages acknowledged around the restart, all answered", total)
}

// unanswered lists the acknowledged messages of folder n that no finished,
// replying turn covers.
func unanswered(f *fleetEnv, n string, ids []int64) []int64 {
	ts, err := f.client.ListTurns(service.WithPrincipal(context.Background(), service.AdminPrincipal), n, 1000)
	if err != nil {
		return ids
	}
	var out []int64
	for _, id := range ids {
		ok := false
		for _, tn := range ts {
			if tn.FirstMessage <= id && id <= tn.LastMessage && tn.Status == store.TurnDone && tn.Outcome != "ok, no reply" {
				ok = true
			}
		}
		if !ok {
			out = append(out, id)
		}
	}
	return out
}

// A runner with a wrong token is refused and the control plane logs it; a
// runner with a good token cannot claim, serve tools for or report on a turn
// whose lease another runner holds, and cannot use the rest of the API.
func TestFleetRefusesForgedOutcomeAndBadToken(t *testing.T) {
	f := newFleet(t, map[string]string{"s": `sleep 3; exec python3 "$AGENT"`})
	bad := f.startRunner("bad", "azk_not-a-token", 1)
	select {
	case <-bad.done:
	case <-time.After(60 * time.Second):
		t.Fatal("a runner with a wrong token kept running")
	}
	if bad.cmd.ProcessState.Success() || !strings.Contains(bad.logs.String(), "refused the runner's token") {
		t.Fatalf("wrong token: exit %v, log:\n%s", bad.cmd.ProcessState, bad.logs)
	}
	f.waitFor(10*time.Second, "the refusal in the control plane log", func() bool {
		return strings.Contains(f.cpLogs.String(), "api request refused: bad token")
	})

	f.startRunner("r1", f.runnerToken("r1"), 1)
	mallory := &dispatch.Client{URL: "http://" + f.addr, Token: f.runnerToken("mallory")}
	f.say("s", "hi")
	var held dispatch.Lease
	js := f.nats.Connect()
	f.waitFor(60*time.Second, "r1's lease of s", func() bool {
		var err error
		held, err = readLease(js, "s")
		return err == nil && held.Runner == "r1"
	})
	ctx := context.Background()
	c := dispatch.Claim{Turn: held.Turn, Attempt: held.Attempt, Dispatch: held.Dispatch, Folder: "s"}
	if _, err := mallory.Claim(ctx, c); !errors.Is(err, dispatch.ErrNotHolder) {
		t.Errorf("mallory claimed r1's turn: %v", err)
	}
	if err := mallory.Report(ctx, dispatch.Outcome{Claim: c, Exit: 0, Output: "forged"}); !errors.Is(err, dispatch.ErrNotHolder) {
		t.Errorf("mallory's forged outcome: %v, want refused", err)
	}
	if rwc, err := mallory.Tunnel(ctx, c); !errors.Is(err, dispatch.ErrNotHolder) {
		if rwc != nil {
			rwc.Close()
		}
		t.Errorf("mallory opened r1's tool session: %v", err)
	}
	if err := daemonCall(ctx, "http://"+f.addr, mallory.Token, "GET", "/v1/folders", nil, nil); service.Code(err) != service.CodeDenied {
		t.Errorf("a runner token listed folders: %v", err)
	}
	f.waitFor(60*time.Second, "the real reply", func() bool { return len(f.replies("s")) == 1 })
	f.waitFor(30*time.Second, "the turn to finish", func() bool {
		ts, err := f.client.ListTurns(service.WithPrincipal(ctx, service.AdminPrincipal), "s", 10)
		return err == nil && len(ts) == 1 && ts[0].Status == store.TurnDone
	})
	if rep := f.replies("s"); len(rep) != 1 || rep[0].Text != "echo: hi" {
		t.Fatalf("replies %+v", rep)
	}
	if !strings.Contains(f.cpLogs.String(), "fleet request refused") {
		t.Errorf("control plane did not log the forged requests")
	}
}
