package main

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// chatDaemon serves the daemon's handler with the turn pipeline over a fresh
// data dir holding folders that run the scripted agent on the host.
func chatDaemon(t *testing.T, tc TurnsConfig, folders ...string) (string, string, *store.Store) {
	t.Helper()
	return chatDaemonWith(t, tc, hostProcess{}, folders...)
}

// chatDaemonWith is chatDaemon with the turns run by runner.
func chatDaemonWith(t *testing.T, tc TurnsConfig, runner turn.Runner, folders ...string) (string, string, *store.Store) {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{MaxTurnsPerDay: tc.MaxTurnsPerDay})
	for _, f := range folders {
		e.AddFolder(t, f, "python3", turn.DefaultGuestHome+"/agent.py")
		e.InstallAgent(t, f)
	}
	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return runner }
	t.Cleanup(func() { newTurnRunner = prev })
	const token = "0123456789abcdef0123"
	h, stop, err := startTurns(context.Background(), tc, e.L, token, "")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(func() { srv.Close(); stop() })
	return srv.URL, token, e.Store
}

// Two terminal chats at once each register their own adapter and each
// print only their own folder's reply; both adapters are gone after.
func TestTwoChatsAtOnce(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "a", "b")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	type sess struct {
		c        *chatSession
		out, st  bytes.Buffer
		err      error
		expected string
	}
	var ss []*sess
	for _, f := range []string{"a", "b"} {
		s := &sess{expected: f + "> echo: hello " + f + "\n"}
		s.c = &chatSession{base: base, token: token, folder: f, chat: "web:" + f, sender: "tester",
			in: strings.NewReader("hello " + f + "\n"), out: &s.out, status: &s.st, poll: 50 * time.Millisecond}
		ss = append(ss, s)
	}
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() { defer wg.Done(); s.err = s.c.run(ctx) }()
	}
	wg.Wait()
	for _, s := range ss {
		if s.err != nil {
			t.Fatalf("chat %s: %v", s.c.folder, s.err)
		}
		if got := s.out.String(); got != s.expected {
			t.Errorf("chat %s printed %q, want %q (status %q)", s.c.folder, got, s.expected, s.st.String())
		}
		if !strings.HasPrefix(s.c.platform, chatPlatform+"-") {
			t.Errorf("chat %s adapter %q", s.c.folder, s.c.platform)
		}
		if _, err := st.GetAdapter(ctx, s.c.platform); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("adapter %s still registered after the chat ended: %v", s.c.platform, err)
		}
	}
	if ss[0].c.platform == ss[1].c.platform {
		t.Fatalf("both chats registered adapter %q", ss[0].c.platform)
	}

	// A later chat with the same folder has a new adapter; the reply follows it.
	var out, status bytes.Buffer
	c := &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("back again\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a> echo: back again\n" {
		t.Fatalf("second chat with a printed %q (status %q)", got, status.String())
	}
}

// A folder past its budget answers the chat with the host's notice.
func TestChatBudgetNotice(t *testing.T) {
	base, token, _ := chatDaemon(t, TurnsConfig{MaxTurnsPerDay: 1}, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, status bytes.Buffer
	c := &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("first\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	c = &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("second\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); !errors.Is(err, errChatFailed) {
		t.Fatalf("a refused turn ended the chat with %v, want a failure", err)
	}
	want := "a> arizuko: this folder's turn budget is used up (1 per day); try later\n"
	if got := out.String(); got != want {
		t.Fatalf("chat past the budget printed %q, want %q", got, want)
	}
	var b service.FolderBudget
	if err := daemonCall(ctx, base, token, "GET", "/v1/budgets/a", nil, &b); err != nil || b.Effective != 1 || b.Own != nil || b.Used != 1 {
		t.Fatalf("budget %+v %v", b, err)
	}
	n := 5
	if err := daemonCall(ctx, base, token, "PUT", "/v1/budgets/a", service.BudgetIn{MaxTurnsPerDay: &n}, &b); err != nil || b.Effective != 5 || b.Own == nil {
		t.Fatalf("set budget %+v %v", b, err)
	}
	bad := -2
	if err := daemonCall(ctx, base, token, "PUT", "/v1/budgets/a", service.BudgetIn{MaxTurnsPerDay: &bad}, nil); service.Code(err) != service.CodeInvalid {
		t.Fatalf("negative budget: %v", err)
	}
	if err := daemonCall(ctx, base, token, "GET", "/v1/budgets/nope", nil, nil); service.Code(err) != service.CodeNotFound {
		t.Fatalf("budget of a missing folder: %v", err)
	}
}

// slowAgent is hostProcess taking as long as a guest boot, so lines piped at
// once would reach the folder while its turn runs.
type slowAgent struct{ hostProcess }

func (s slowAgent) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	time.Sleep(300 * time.Millisecond) // the scenario: a turn that takes a while, not a wait for anything
	return s.hostProcess.Run(ctx, j)
}

// Lines piped into a chat are each a message with a turn and an answer of
// its own, in order, and the chat ends with 0.
func TestChatPipedLinesEachAnswered(t *testing.T) {
	base, token, st := chatDaemonWith(t, TurnsConfig{}, slowAgent{}, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, status bytes.Buffer
	c := &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("first line\nsecond line\nthird line\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); err != nil {
		t.Fatalf("chat: %v (status %q)", err, status.String())
	}
	if got, want := out.String(), "a> echo: first line\na> echo: second line\na> echo: third line\n"; got != want {
		t.Fatalf("chat printed %q, want %q (status %q)", got, want, status.String())
	}
	if ts, _ := st.ListTurns(ctx, "a", 10); len(ts) != 3 {
		t.Fatalf("%d turns, want one per line: %+v", len(ts), ts)
	}
}
