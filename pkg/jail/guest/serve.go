// Package guest is the guest's end of a control session: it receives the RunSpec, runs
// the one command with its stdio carried over the session, forwards signals and resizes,
// carries in-guest proxy and MCP connections to the host, and reports how the command
// ended. It is what guest-init runs as PID 1, and it also runs as a normal process over
// any byte stream, which is how it is tested.
package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// SetupExitCode is Exit.Code when the command never started because the guest could not
// be set up (bad RunSpec, mount or network failure); Exit.Error says why.
const SetupExitCode = 125

// ErrPoweroff is returned when the host asked to power off (or went away) before the
// command ended; no exit frame is sent.
var ErrPoweroff = errors.New("guest: host asked to power off")

// Config tunes Serve for where it runs.
type Config struct {
	// Prepare runs after the RunSpec arrived and before the command starts; guest-init
	// builds the root and the network here. An error is reported as a setup failure.
	Prepare func(ctx context.Context, rs *control.RunSpec) error
	// BeforeExit runs after the output streams were closed and before the exit frame is
	// sent (guest-init syncs filesystems here).
	BeforeExit func()
	// Reaper waits for the command when set (PID 1); nil waits for it directly.
	Reaper *Reaper
	// ExitLinger bounds the wait for the host to close the session after the exit frame,
	// so the frame is delivered before the caller powers off. Default 2s.
	ExitLinger time.Duration
	Log        *slog.Logger // nil discards
}

// Serve runs one session on rw, which must already be connected to the host.
func Serve(ctx context.Context, rw io.ReadWriteCloser, cfg Config) (control.Exit, error) {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.ExitLinger == 0 {
		cfg.ExitLinger = 2 * time.Second
	}
	sess, err := control.Server(rw)
	if err != nil {
		return control.Exit{}, err
	}
	defer sess.Close()
	s := &session{cfg: cfg, sess: sess, streams: map[string]chan net.Conn{}}
	for _, k := range []string{control.KindCtl, control.KindStdin, control.KindStdout, control.KindStderr} {
		s.streams[k] = make(chan net.Conn, 1)
	}
	go s.acceptLoop()
	return s.run(ctx)
}

// sessionKey carries the control session in the context Prepare gets.
type sessionKey struct{}

// OpenStream opens a stream of kind to the host from within Prepare (guest-init mounts
// the host's shares over such streams).
func OpenStream(ctx context.Context, kind string) (net.Conn, error) {
	sess, ok := ctx.Value(sessionKey{}).(*yamux.Session)
	if !ok {
		return nil, errors.New("guest: no control session in this context")
	}
	return control.Open(sess, kind)
}

type session struct {
	cfg     Config
	sess    *yamux.Session
	streams map[string]chan net.Conn
	ctl     *control.Conn
	stdout  net.Conn
	stderr  net.Conn
}

// acceptLoop hands the host's streams to run. The guest never accepts proxy or mcp
// streams: those are opened by the guest only.
func (s *session) acceptLoop() {
	for {
		kind, c, err := control.Accept(s.sess)
		if err != nil {
			if errors.Is(err, control.ErrBadHeader) {
				continue
			}
			return
		}
		ch, ok := s.streams[kind]
		if !ok {
			c.Close()
			continue
		}
		select {
		case ch <- c:
		default:
			c.Close() // a second stream of a kind that exists once
		}
	}
}

func (s *session) wait(ctx context.Context, kind string) (net.Conn, error) {
	select {
	case c := <-s.streams[kind]:
		return c, nil
	case <-s.sess.CloseChan():
		return nil, fmt.Errorf("guest: session closed waiting for %s stream: %w", kind, ErrPoweroff)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// run serves one command: it takes the run message and the stdio streams, sets up what
// the command needs, starts it, relays its output and returns its exit (or why none).
func (s *session) run(ctx context.Context) (control.Exit, error) {
	rs, stdin, err := s.open(ctx)
	if err != nil {
		return control.Exit{}, err
	}
	if len(rs.Argv) == 0 {
		return s.finish(ctx, setupFailure(errors.New("guest: run message has an empty argv")))
	}
	closeSetup, err := s.setup(ctx, rs)
	defer closeSetup()
	if err != nil {
		return s.finish(ctx, setupFailure(err))
	}

	p, err := start(rs, CommandEnv(rs), s.cfg.Reaper)
	if err != nil {
		_ = s.ctl.Send(control.Message{Type: control.MsgLog, Text: err.Error()})
		return s.finish(ctx, startFailure(err))
	}
	s.cfg.Log.Debug("command started", "pid", p.pid, "argv0", rs.Argv[0])
	_ = s.ctl.Send(control.Message{Type: control.MsgStarted, Pid: p.pid})

	exited := make(chan struct{})
	copied := s.relay(p, stdin, exited)
	poweroff := make(chan struct{})
	go s.control(p, poweroff)

	select {
	case st := <-p.done:
		close(exited)
		s.cfg.Log.Debug("command exited", "status", int(st))
		exit := exitOf(st)
		for range 2 {
			if err := <-copied; err != nil {
				s.cfg.Log.Debug("copy output", "err", err)
			}
		}
		p.closeOutputs()
		return s.finish(ctx, exit)
	case <-poweroff:
	case <-ctx.Done():
	}
	_ = p.signal(9)
	p.closeOutputs()
	if ctx.Err() != nil {
		return control.Exit{}, ctx.Err()
	}
	return control.Exit{}, ErrPoweroff
}

// open takes the control stream and its run message, then the stdin, stdout and stderr
// streams, in the order the host opens them.
func (s *session) open(ctx context.Context) (*control.RunSpec, net.Conn, error) {
	ctl, err := s.wait(ctx, control.KindCtl)
	if err != nil {
		return nil, nil, err
	}
	s.ctl = control.NewConn(ctl)
	m, err := s.ctl.Recv()
	if err != nil {
		return nil, nil, fmt.Errorf("guest: waiting for run message: %w", err)
	}
	if m.Type != control.MsgRun || m.Run == nil {
		return nil, nil, fmt.Errorf("guest: first message is %q, want %q", m.Type, control.MsgRun)
	}
	stdin, err := s.wait(ctx, control.KindStdin)
	if err != nil {
		return nil, nil, err
	}
	if s.stdout, err = s.wait(ctx, control.KindStdout); err != nil {
		return nil, nil, err
	}
	if s.stderr, err = s.wait(ctx, control.KindStderr); err != nil {
		return nil, nil, err
	}
	return m.Run, stdin, nil
}

// setup runs the caller's Prepare and starts the listeners the run asks for (the
// proxy-only forwarder, the MCP socket). The returned func closes them, also on error.
func (s *session) setup(ctx context.Context, rs *control.RunSpec) (func(), error) {
	var fwds []*forwarder
	closeAll := func() {
		for i := len(fwds) - 1; i >= 0; i-- {
			fwds[i].close()
		}
	}
	if s.cfg.Prepare != nil {
		if err := s.cfg.Prepare(context.WithValue(ctx, sessionKey{}, s.sess), rs); err != nil {
			return closeAll, err
		}
	}
	if rs.Net.Mode == control.NetProxyOnly && rs.Net.ProxyListen != "" {
		f, err := listenProxy(s.sess, rs.Net.ProxyListen, s.cfg.Log)
		if err != nil {
			return closeAll, err
		}
		fwds = append(fwds, f)
	}
	if rs.MCPSocket != "" {
		f, err := listenMCP(s.sess, rs.MCPSocket, s.cfg.Log)
		if err != nil {
			return closeAll, err
		}
		fwds = append(fwds, f)
	}
	return closeAll, nil
}

// relay copies stdin to the command and its output to the host streams until exited;
// the channel gets one result per output stream (two; a pty has one, so nil stands in).
func (s *session) relay(p *process, stdin net.Conn, exited <-chan struct{}) <-chan error {
	copied := make(chan error, 2)
	if p.ptmx != nil {
		go copyInput(p.ptmx, stdin, false)
		go func() { copied <- copyOutput(s.stdout, p.ptmx, exited) }()
		copied <- nil
	} else {
		go copyInput(p.stdin, stdin, true)
		go func() { copied <- copyOutput(s.stdout, p.stdout, exited) }()
		go func() { copied <- copyOutput(s.stderr, p.stderr, exited) }()
	}
	return copied
}

// control applies the host's messages to the running command until poweroff or until
// the ctl stream ends (the host is gone: same as poweroff).
func (s *session) control(p *process, poweroff chan<- struct{}) {
	defer close(poweroff)
	for {
		m, err := s.ctl.Recv()
		if err != nil {
			return
		}
		switch m.Type {
		case control.MsgSignal:
			if m.Signal > 0 && m.Signal < 65 {
				_ = p.signal(m.Signal)
			}
		case control.MsgResize:
			_ = p.resize(m.Rows, m.Cols)
		case control.MsgPoweroff:
			return
		}
	}
}

// finish closes the output streams, sends the exit frame and waits (bounded) for the host
// to close the session, so the frame is not lost to an immediate power-off.
func (s *session) finish(ctx context.Context, exit control.Exit) (control.Exit, error) {
	_ = control.CloseWrite(s.stdout)
	_ = control.CloseWrite(s.stderr)
	if s.cfg.BeforeExit != nil {
		s.cfg.BeforeExit()
	}
	s.cfg.Log.Debug("sending exit", "code", exit.Code, "signal", exit.Signal)
	if err := s.ctl.Send(control.Message{Type: control.MsgExit, Exit: &exit}); err != nil {
		if s.sess.IsClosed() {
			return exit, nil // the host read the frame and hung up before yamux reported the write
		}
		return exit, err
	}
	t := time.NewTimer(s.cfg.ExitLinger)
	defer t.Stop()
	select {
	case <-s.sess.CloseChan():
	case <-t.C:
	case <-ctx.Done():
	}
	return exit, nil
}

func setupFailure(err error) control.Exit {
	return control.Exit{Code: SetupExitCode, Error: "setup: " + err.Error()}
}

func startFailure(err error) control.Exit {
	switch {
	case errors.Is(err, ErrNotFound):
		return control.Exit{Code: 127, Error: control.ExecNotFound}
	case errors.Is(err, ErrNotExecutable):
		return control.Exit{Code: 126, Error: control.ExecNotExecutable}
	}
	return setupFailure(err)
}
