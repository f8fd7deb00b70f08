package main

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// hostProcess runs the agent as a host process instead of a guest, pointed
// at the folder's socket: what `arizuko runner --unsafe-host-agent` uses so
// fleet tests can run many turns without booting guests. It isolates nothing.
type hostProcess struct{}

func (hostProcess) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	argv := make([]string, len(j.Argv))
	for i, a := range j.Argv {
		argv[i] = strings.Replace(a, j.GuestHome, j.HostHome, 1)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + j.HostHome}, j.Env...)
	cmd.Env = append(cmd.Env, "ARIZUKO_MCP_SOCKET="+j.Socket)
	// The agent and all it started die with its turn or its runner, as a
	// guest would.
	proc.Tie(cmd, syscall.SIGKILL)
	cmd.Cancel = func() error { return proc.KillGroup(cmd) }
	cmd.Dir, cmd.Stdin, cmd.Stdout, cmd.Stderr = j.HostHome, strings.NewReader(j.Prompt), j.Stdout, j.Stdout
	if j.Answer != nil {
		cmd.Stdout = io.MultiWriter(j.Stdout, j.Answer)
	}
	var ee *exec.ExitError
	if err := cmd.Run(); errors.As(err, &ee) {
		return turn.Result{Exit: ee.ExitCode()}, nil
	} else if err != nil {
		return turn.Result{Exit: 127}, err
	}
	return turn.Result{}, nil
}
