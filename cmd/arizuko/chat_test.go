package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
	"github.com/crackbox/crackbox/pkg/turn"
)

// hostAgent runs the agent as a host process instead of a guest, pointed at
// the host path of the folder's MCP socket.
type hostAgent struct{}

func (hostAgent) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	argv := make([]string, len(j.Argv))
	for i, a := range j.Argv {
		argv[i] = strings.Replace(a, j.GuestHome, j.HostHome, 1)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + j.HostHome}, j.Env...)
	cmd.Env = append(cmd.Env, "ARIZUKO_MCP_SOCKET="+j.Socket)
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = j.HostHome, strings.NewReader(j.Prompt), j.Stdout, j.Stdout
	var ee *exec.ExitError
	if err := cmd.Run(); errors.As(err, &ee) {
		return turn.Result{Exit: ee.ExitCode()}, nil
	} else if err != nil {
		return turn.Result{Exit: 127}, err
	}
	return turn.Result{}, nil
}

// The daemon's handler with the turn pipeline, and the terminal chat as the
// adapter: a typed line runs a turn whose reply is delivered to the chat.
func TestChatThroughPipeline(t *testing.T) {
	data, err := os.MkdirTemp("", "cz")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	ctx := context.Background()
	l, err := service.Open(ctx, service.Options{DataDir: data, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Bootstrap(ctx)
	actx := service.WithPrincipal(ctx, service.AdminPrincipal)
	if _, err := l.AddFolder(actx, store.Folder{Path: "a", AgentCommand: []string{"python3", turn.DefaultGuestHome + "/agent.py"}}); err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	agent, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "examples", "agents", "scripted", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(data, "homes", "a", "agent.py"), agent, 0o755)

	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return hostAgent{} }
	defer func() { newTurnRunner = prev }()
	const token = "0123456789abcdef0123"
	h, stop, err := startTurns(ctx, TurnsConfig{}, l, token, "")
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	srv := httptest.NewServer(h)
	defer srv.Close()

	// The extra endpoints share the core API's auth and envelope.
	resp, err := http.Get(srv.URL + "/v1/turns")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated /v1/turns: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	if err := daemonCall(ctx, srv.URL, token, http.MethodPost, "/v1/adapters", store.Adapter{Platform: "x", CallbackURL: "ftp://nope"}, nil); service.Code(err) != service.CodeInvalid {
		t.Fatalf("bad callback accepted: %v", err)
	}

	var out, status bytes.Buffer
	c := &chatSession{base: srv.URL, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("hello folder\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.run(cctx); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a> echo: hello folder\n" {
		t.Fatalf("chat printed %q (status %q)", got, status.String())
	}
	var ts []store.Turn
	if err := daemonCall(ctx, srv.URL, token, http.MethodGet, "/v1/turns?folder=a", nil, &ts); err != nil || len(ts) != 1 || ts[0].Status != store.TurnDone {
		t.Fatalf("turns %+v %v", ts, err)
	}
	var d service.TurnDetail
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if err := daemonCall(ctx, srv.URL, token, http.MethodGet, "/v1/turns/1", nil, &d); err != nil {
			t.Fatal(err)
		}
		if len(d.Outbound) != 1 || d.Outbound[0].Status != "pending" || time.Now().After(deadline) {
			break
		}
	}
	if len(d.Messages) != 1 || d.Messages[0].Text != "hello folder" || len(d.Outbound) != 1 || d.Outbound[0].Status != "sent" {
		t.Fatalf("turn detail %+v", d)
	}
}
