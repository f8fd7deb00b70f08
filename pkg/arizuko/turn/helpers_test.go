package turn

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// hostRunner runs the agent as a plain host process: the unit-test stand-in
// for a guest. It maps the guest home in argv to the folder's host home and
// points the agent at the host path of the folder's socket.
type hostRunner struct{}

func (hostRunner) Run(ctx context.Context, j Job) (Result, error) {
	argv := make([]string, len(j.Argv))
	for i, a := range j.Argv {
		argv[i] = strings.Replace(a, j.GuestHome, j.HostHome, 1)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + j.HostHome}
	for _, e := range j.Env {
		if !strings.HasPrefix(e, "ARIZUKO_MCP_SOCKET=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, "ARIZUKO_MCP_SOCKET="+j.Socket)
	cmd.Dir = j.HostHome
	cmd.Stdin = strings.NewReader(j.Prompt)
	cmd.Stdout, cmd.Stderr = j.Stdout, j.Stdout
	if j.Answer != nil {
		cmd.Stdout = io.MultiWriter(j.Stdout, j.Answer)
	}
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return Result{}, nil
	case errors.As(err, &ee):
		return Result{Exit: ee.ExitCode()}, nil
	}
	return Result{Exit: 127, ExecError: err.Error()}, ErrTerminal
}

type env struct {
	l    *service.Local
	st   *store.Store
	data string
	ctx  context.Context // admin principal
	q    *Queue
}

// newEnv opens a data dir (short, for the unix socket path) with folders.
func newEnv(t testing.TB, data string, folders ...string) *env {
	t.Helper()
	se := servicetest.New(t, servicetest.Options{Data: data, Keyed: true})
	e := &env{l: se.L, st: se.Store, data: se.Data, ctx: se.Admin}
	for _, f := range folders {
		// A data dir reopened after a restart already has its folders.
		if _, err := se.L.AddFolder(e.ctx, store.Folder{Path: f, AgentCommand: []string{"python3", DefaultGuestHome + "/agent.py"}}); err != nil && !errors.Is(err, store.ErrExists) {
			t.Fatal(err)
		}
		se.InstallAgent(t, f)
	}
	return e
}

// start runs a queue over the env with runner until the test ends.
func (e *env) start(t testing.TB, runner Runner, mod func(*Options)) *Queue {
	t.Helper()
	var q *Queue
	g := gated.New(gated.Options{Store: e.st, Gate: e.l.Gate(), Control: e.l, DataDir: e.data,
		OnMessage: func(f, _ string) { q.Kick(f) }})
	o := Options{Store: e.st, Gate: e.l.Gate(), Control: e.l, Gated: g, Runner: runner, DataDir: e.data,
		RetryDelay: 10 * time.Millisecond, Sweep: 50 * time.Millisecond}
	if mod != nil {
		mod(&o)
	}
	q = New(o)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { q.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	e.q = q
	return q
}

func (e *env) post(t testing.TB, chat, text string) store.Message {
	t.Helper()
	in, err := e.l.PostMessage(e.ctx, service.MessageIn{ChatJID: chat, Text: text, Platform: "test", Sender: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if e.q != nil {
		e.q.Kick(in.Route.Folder)
	}
	return in.Message
}

// waitTurns waits until n turns of folder have ended; the bound leaves room
// for two guests booted one after the other under TCG on a loaded host.
func (e *env) waitTurns(t testing.TB, folder string, n int) []store.Turn {
	t.Helper()
	// A hang guard only: a guest turn waits for a machine-wide slot and runs up to its own
	// timeout, so on a loaded machine it may take minutes and still be right.
	var ts []store.Turn
	ended := 0
	if !eventually.Within(10*time.Minute, func() bool {
		var err error
		if ts, err = e.st.ListTurns(context.Background(), folder, 100); err != nil {
			t.Fatal(err)
		}
		ended = 0
		for _, x := range ts {
			if x.Status == store.TurnDone || x.Status == store.TurnFailed {
				ended++
			}
		}
		return ended >= n
	}) {
		t.Fatalf("%s: %d of %d turns ended: %+v", folder, ended, n, ts)
	}
	return ts
}

// blockRunner holds every attempt until released and records concurrency.
type blockRunner struct {
	mu       sync.Mutex
	live     map[string]int
	maxLive  map[string]int
	total    int
	maxTotal int
	prompts  map[string][]string
	started  chan string
	release  chan struct{}
	exits    []int // exit codes to return, in order; then 0
	err      error
}

func newBlockRunner() *blockRunner {
	return &blockRunner{live: map[string]int{}, maxLive: map[string]int{}, prompts: map[string][]string{},
		started: make(chan string, 100), release: make(chan struct{})}
}

func (r *blockRunner) Run(ctx context.Context, j Job) (Result, error) {
	f := j.Turn.Folder
	r.mu.Lock()
	r.live[f]++
	r.total++
	r.maxLive[f] = max(r.maxLive[f], r.live[f])
	r.maxTotal = max(r.maxTotal, r.total)
	r.prompts[f] = append(r.prompts[f], j.Prompt)
	exit := 0
	if len(r.exits) > 0 {
		exit, r.exits = r.exits[0], r.exits[1:]
	}
	err := r.err
	r.mu.Unlock()
	r.started <- f
	select {
	case <-r.release:
	case <-ctx.Done():
	}
	r.mu.Lock()
	r.live[f]--
	r.total--
	r.mu.Unlock()
	return Result{Exit: exit}, err
}
