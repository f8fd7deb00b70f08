package turn

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

func recv(t *testing.T, c chan string) string {
	t.Helper()
	select {
	case f := <-c:
		return f
	case <-time.After(10 * time.Second):
		t.Fatal("no turn started")
	}
	return ""
}

// Messages arriving while a folder's turn runs wait and form its next turn.
func TestOneLiveTurnPerFolder(t *testing.T) {
	e := newEnv(t, "", "a")
	r := newBlockRunner()
	e.start(t, r, nil)
	e.post(t, "web:a", "first")
	recv(t, r.started)
	e.post(t, "web:a", "second")
	e.post(t, "web:a", "third")
	select {
	case <-r.started:
		t.Fatal("a second turn of the folder started while the first ran")
	case <-time.After(300 * time.Millisecond):
	}
	r.release <- struct{}{}
	recv(t, r.started)
	r.release <- struct{}{}
	ts := e.waitTurns(t, "a", 2)
	if len(ts) != 2 {
		t.Fatalf("%d turns, want 2", len(ts))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxLive["a"] != 1 {
		t.Fatalf("folder had %d live turns at once", r.maxLive["a"])
	}
	p := r.prompts["a"]
	if !strings.Contains(p[0], ">first<") || strings.Contains(p[0], "second") {
		t.Fatalf("first prompt %q", p[0])
	}
	if !strings.Contains(p[1], ">second<") || !strings.Contains(p[1], ">third<") || strings.Contains(p[1], "first") {
		t.Fatalf("second prompt %q", p[1])
	}
	for _, x := range ts {
		if x.Status != store.TurnDone || x.Attempts != 1 {
			t.Fatalf("turn %+v", x)
		}
	}
	c, _ := e.st.GetChat(context.Background(), "web:a")
	if c.AgentCursor != ts[0].LastMessage {
		t.Fatalf("agent_cursor %d, want %d", c.AgentCursor, ts[0].LastMessage)
	}
}

// With a cap of 5 live guests the sixth folder's turn waits, then runs.
func TestCapMakesSixthTurnWait(t *testing.T) {
	var folders []string
	for i := range 6 {
		folders = append(folders, fmt.Sprintf("f%d", i))
	}
	e := newEnv(t, "", folders...)
	r := newBlockRunner()
	q := e.start(t, r, func(o *Options) { o.MaxGuests = 5 })
	for _, f := range folders {
		e.post(t, "web:"+f, "hi "+f)
	}
	var started []string
	for range 5 {
		started = append(started, recv(t, r.started))
	}
	select {
	case f := <-r.started:
		t.Fatalf("sixth turn (%s) started past the cap", f)
	case <-time.After(300 * time.Millisecond):
	}
	waiting := q.Waiting()
	if len(waiting) != 1 || slices.Contains(started, waiting[0]) {
		t.Fatalf("waiting %v, started %v", waiting, started)
	}
	ts, _ := e.st.ListTurns(context.Background(), waiting[0], 10)
	if len(ts) != 1 || ts[0].Status != store.TurnQueued {
		t.Fatalf("waiting folder's turn %+v", ts)
	}
	r.release <- struct{}{}
	if f := recv(t, r.started); f != waiting[0] {
		t.Fatalf("after a slot freed %s started, want %s", f, waiting[0])
	}
	for range 5 {
		r.release <- struct{}{}
	}
	for _, f := range folders {
		if ts := e.waitTurns(t, f, 1); ts[0].Status != store.TurnDone {
			t.Fatalf("%s: %+v", f, ts[0])
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.maxTotal != 5 {
		t.Fatalf("%d guests at once, cap 5", r.maxTotal)
	}
}

// A freed guest slot goes to the waiting tenant with the fewest live guests,
// so one tenant's many busy folders (register_group and delegate_group make
// them cheap) never hold another tenant's one message behind all of them.
func TestTenantsShareSlotsRoundRobin(t *testing.T) {
	cases := []struct {
		name string
		cap  int
	}{
		{"one slot", 1},
		{"two slots", 2},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			acme := []string{"acme"}
			for i := range c.cap + 2 {
				acme = append(acme, fmt.Sprintf("acme/c%d", i))
			}
			e := newEnv(t, "", append(acme, "globex", "initech")...)
			r := newBlockRunner()
			q := e.start(t, r, func(o *Options) { o.MaxGuests = c.cap })
			waitWaiting := func(n int) {
				t.Helper()
				if !eventually.Within(10*time.Second, func() bool { return len(q.Waiting()) >= n }) {
					t.Fatalf("waiting %v, want %d folders", q.Waiting(), n)
				}
			}
			// acme alone takes every slot and queues the rest of its folders.
			for _, f := range acme {
				e.post(t, "web:"+f, "busy work")
			}
			for range c.cap {
				if f := recv(t, r.started); router.Tenant(f) != "acme" {
					t.Fatalf("%s started before acme's flood", f)
				}
			}
			waitWaiting(len(acme) - c.cap)
			e.post(t, "web:globex", "hello")
			waitWaiting(len(acme) - c.cap + 1)
			e.post(t, "web:initech", "hello")
			waitWaiting(len(acme) - c.cap + 2)
			for _, want := range []string{"globex", "initech"} {
				r.release <- struct{}{}
				if f := recv(t, r.started); f != want {
					t.Fatalf("after a slot freed %s started, want %s (waiting %v)", f, want, q.Waiting())
				}
			}
			close(r.release)
			for _, f := range append(acme, "globex", "initech") {
				if ts := e.waitTurns(t, f, 1); ts[0].Status != store.TurnDone {
					t.Fatalf("%s: %+v", f, ts[0])
				}
			}
			r.mu.Lock()
			defer r.mu.Unlock()
			if r.maxTotal != c.cap {
				t.Fatalf("%d guests at once, cap %d", r.maxTotal, c.cap)
			}
			for f, n := range r.maxLive {
				if n != 1 {
					t.Fatalf("%s had %d live turns at once", f, n)
				}
			}
			// Once idle, the scheduler remembers no tenant.
			eventually.True(t, 10*time.Second, "the idle queue forgets every tenant", func() bool {
				q.mu.Lock()
				defer q.mu.Unlock()
				return len(q.granted) == 0
			})
		})
	}
}

func TestRetriesThenTerminal(t *testing.T) {
	cases := []struct {
		name     string
		exits    []int
		err      error
		status   string
		attempts int
	}{
		{"succeeds on third attempt", []int{1, 1, 0}, nil, store.TurnDone, 3},
		{"fails after three retries", []int{1, 1, 1, 1, 1}, nil, store.TurnFailed, 4},
		{"terminal failure is not retried", []int{127}, fmt.Errorf("agent missing: %w", ErrTerminal), store.TurnFailed, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, "", "a")
			r := newBlockRunner()
			r.exits, r.err = c.exits, c.err
			close(r.release)
			e.start(t, r, nil)
			e.post(t, "web:a", "go")
			ts := e.waitTurns(t, "a", 1)
			if ts[0].Status != c.status || ts[0].Attempts != c.attempts {
				t.Fatalf("turn %+v, want %s after %d", ts[0], c.status, c.attempts)
			}
		})
	}
}

func TestNoAgentCommandIsTerminal(t *testing.T) {
	e := newEnv(t, "")
	if _, err := e.l.AddFolder(e.ctx, store.Folder{Path: "bare"}); err != nil {
		t.Fatal(err)
	}
	r := newBlockRunner()
	e.start(t, r, nil)
	e.post(t, "web:bare", "hello")
	ts := e.waitTurns(t, "bare", 1)
	if ts[0].Status != store.TurnFailed || !strings.Contains(ts[0].Error, "no agent command") {
		t.Fatalf("turn %+v", ts[0])
	}
}

// The scripted agent, run as a host process, replies through the folder's
// real MCP socket; the reply is stored pending for delivery.
func TestHostAgentRepliesThroughMCP(t *testing.T) {
	e := newEnv(t, "", "a", "b")
	e.start(t, hostRunner{}, nil)
	e.post(t, "web:b", "chatter in b")
	e.waitTurns(t, "b", 1)
	if err := e.st.AddObserver(context.Background(), "a", "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:a", Action: "mcp:observe_group", Scope: "b", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:a", Action: "mcp:submit_turn", Scope: "{self}", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	e.post(t, "web:a", "hello there")
	ts := e.waitTurns(t, "a", 1)
	if ts[0].Status != store.TurnDone || ts[0].Outcome != "ok: handled hello" {
		t.Fatalf("turn %+v", ts[0])
	}
	outs, err := e.st.TurnOutbound(context.Background(), ts[0].ID)
	if err != nil || len(outs) != 1 {
		t.Fatalf("outbound %+v %v", outs, err)
	}
	// b's inbound message and b's own echo reply are both observed.
	if outs[0].Text != "echo: hello there [observed b:2]" || outs[0].ChatJID != "web:a" || outs[0].Status != "pending" {
		t.Fatalf("reply %+v", outs[0])
	}
}

func TestBuildPromptCapsObserved(t *testing.T) {
	msg := func(id int64, text string) store.Message {
		return store.Message{ID: id, ChatJID: "c", Sender: "s", Text: text, Direction: "in"}
	}
	turn := store.Turn{Folder: "a"}
	obs := []Observed{{Folder: "b", Messages: []store.Message{msg(1, "old <b>"), msg(2, "new")}}}
	full := BuildPrompt(turn, []store.Message{msg(3, "mine")}, obs, 10000)
	if !strings.Contains(full, `<observed folder="b">`) || !strings.Contains(full, "old &lt;b&gt;") || !strings.Contains(full, ">mine<") {
		t.Fatalf("prompt %q", full)
	}
	if strings.Index(full, "old") > strings.Index(full, "new") {
		t.Fatal("observed lines out of order")
	}
	capped := BuildPrompt(turn, []store.Message{msg(3, "mine")}, obs, len(line(msg(2, "new")))+1)
	if strings.Contains(capped, ">old") || !strings.Contains(capped, ">new<") {
		t.Fatalf("cap keeps the newest: %q", capped)
	}
}

// The jail writes stdout and stderr into one OutputTail from two goroutines.
func TestOutputTailKeepsTail(t *testing.T) {
	var b OutputTail
	done := make(chan struct{})
	for range 2 {
		go func() {
			for range 1000 {
				b.Write([]byte("0123456789"))
			}
			done <- struct{}{}
		}()
	}
	<-done
	<-done
	b.Write([]byte("END"))
	got := b.Bytes()
	if len(got) > 4*maxOutput || !strings.HasSuffix(string(got), "END") {
		t.Fatalf("kept %d bytes ending %q", len(got), got[max(0, len(got)-5):])
	}
	if s := errText(nil, got); !strings.HasPrefix(s, "output: ") || len(s) > maxOutput+len("output: ") {
		t.Fatalf("errText %d bytes", len(s))
	}
}
