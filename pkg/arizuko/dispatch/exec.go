package dispatch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"

	"github.com/crackbox/crackbox/internal/relay"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// execute runs a claimed job on this host: the folder's home under DataDir,
// its MCP socket bound here and carried to the control plane, the agent
// through the runner's turn.Runner.
func (r *Runner) execute(ctx context.Context, it Item, c Claim, w Work) Outcome {
	out := Outcome{Claim: c}
	fail := func(err error, terminal bool) Outcome {
		out.Exit, out.Error, out.Terminal = 1, err.Error(), terminal
		return out
	}
	home, err := folder.EnsureHome(r.o.DataDir, w.Folder)
	if err != nil {
		return fail(err, true)
	}
	ht, err := r.pullHome(ctx, c, w.Folder, home)
	if err != nil {
		return fail(fmt.Errorf("home: %w", err), false)
	}
	tunnel := func(g net.Conn) {
		defer g.Close()
		rwc, err := r.o.Client.Tunnel(ctx, c)
		if err != nil {
			r.o.Log.Warn("tool session not opened", "turn", c.Turn, "err", err)
			return
		}
		// The tunnel has no half-close of its own; either side ending ends the tool
		// session, and so does the turn's ctx.
		relay.Copy(ctx, g, rwc, relay.CloseBoth)
	}
	ln, err := listen(gated.SocketPath(r.o.DataDir, w.Folder))
	if err != nil {
		return fail(err, false)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	defer ln.Close()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			g, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() { defer wg.Done(); tunnel(g) }()
		}
	}()
	var tail turn.OutputTail
	answer := &turn.OutputTail{Max: gated.MaxText}
	job := turn.Job{
		Turn: store.Turn{ID: it.Turn, Folder: w.Folder, Topic: w.Topic, Attempts: it.Attempt - 1},
		Argv: w.Argv, Env: w.Env, Secrets: w.Secrets, Prompt: w.Prompt, HostHome: home, GuestHome: w.GuestHome, Allow: w.Allow,
		Socket: ln.Addr().String(), MCPConn: tunnel, MemoryMiB: w.MemoryMiB, CPUs: w.CPUs, Stdout: &tail,
	}
	if w.Answer {
		job.Answer = answer
	}
	res, err := r.o.Exec.Run(ctx, job)
	out.Exit, out.ExecError, out.Egress, out.Output, out.Answer = res.Exit, res.ExecError, res.Egress, string(tail.Bytes()), string(answer.Bytes())
	out.Guarded, out.HomeStats = res.Guarded, ht.stats
	if err != nil {
		out.Error, out.Terminal = err.Error(), errors.Is(err, turn.ErrTerminal)
	}
	// A turn cut off (lease lost, shutdown) sends nothing; a retryable
	// failure would have nothing committed anyway.
	if ctx.Err() == nil && ((out.Error == "" && out.Exit == 0) || out.Terminal) {
		r.pushHome(ctx, c, ht, w.HomeLimits, &out)
	}
	return out
}

// listen binds the folder's socket on this host, owner-only.
func listen(path string) (net.Listener, error) {
	if len(path) >= 108 {
		return nil, fmt.Errorf("%s is %d bytes, unix sockets allow 107; use a shorter --data: %w", path, len(path), gated.ErrSocketPath)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}
