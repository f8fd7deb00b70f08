package jail

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"github.com/crackbox/crackbox/internal/lograte"
	"github.com/crackbox/crackbox/pkg/jail/control"
)

// ErrSessionLost is returned by runSession when the control session ended without an
// exit frame: the guest crashed, powered off early, or QEMU died.
var ErrSessionLost = errors.New("jail: guest ended the session without an exit status")

// Stdio is the command's standard streams on the host. Nil fields mean empty input and
// discarded output.
type Stdio struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

type sessionHooks struct {
	Signals   <-chan int                   // signal numbers to forward to the command
	Resize    <-chan [2]uint16             // rows, cols for the pty
	ProxyConn func(net.Conn)               // a guest connection to the in-guest proxy listener; nil = refuse
	MCPConn   func(net.Conn)               // a connection to the in-guest MCP socket; nil = refuse
	ShareConn func(tag string, c net.Conn) // a guest mounting a stream share; nil = refuse
	SyncConn  func(tag string, c net.Conn) // a guest handing back a share's changes; nil = refuse
	Started   func(pid int)
	// Drain, when set, is how long a run past its deadline gives the guest to report
	// the command's exit after the host killed it, before the guest is powered off: a
	// workdir synced at exit hands its changes back in that time.
	Drain time.Duration
	Log   *slog.Logger // nil discards
}

// runSession speaks the control protocol on rw (already connected to guest-init), sends
// rs, streams stdio, and returns how the command ended. It returns only after stdout and
// stderr were fully copied. Cancelling ctx sends poweroff and returns ctx.Err(); so does
// a guest that sends its exit frame but holds an output stream open until ctx ends (the
// Exit is returned too, the output may be cut short).
func runSession(ctx context.Context, rw io.ReadWriteCloser, rs control.RunSpec, stdio Stdio, h sessionHooks) (control.Exit, error) {
	if h.Log == nil {
		h.Log = slog.New(slog.DiscardHandler)
	}
	sess, err := control.Client(rw)
	if err != nil {
		return control.Exit{}, err
	}
	defer sess.Close()
	lost := func(err error) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("%w: %v", ErrSessionLost, err)
	}
	ctl, streams, err := openStreams(ctx, sess, rs)
	if err != nil {
		return control.Exit{}, lost(err)
	}
	hostile := make(chan error, 1)
	go func() { hostile <- acceptGuestStreams(sess, h) }()
	copies := copyStdio(streams, stdio, h.Log)
	// waitCopies waits for the output copies; a guest that sends its exit frame but keeps
	// an output stream open is cut off when ctx ends.
	waitCopies := func() error {
		done := make(chan struct{})
		go func() { copies.Wait(); close(done) }()
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			sess.Close()
			<-done
			return ctx.Err()
		}
	}

	done := make(chan struct{})
	defer close(done)
	go forwardControls(ctl, h, done)
	msgs, recvErr := receive(ctl, done)
	started := false
	for {
		select {
		case <-ctx.Done():
			if h.Drain > 0 && errors.Is(ctx.Err(), context.DeadlineExceeded) {
				drain(ctl, msgs, recvErr, h.Drain)
			}
			_ = ctl.Send(control.Message{Type: control.MsgPoweroff})
			sess.Close()
			copies.Wait()
			return control.Exit{}, ctx.Err()
		case err := <-recvErr:
			sess.Close()
			copies.Wait()
			// The accept loop ends promptly once the session is closed; its reason, if
			// it ended the session itself, is the run's.
			select {
			case herr := <-hostile:
				if herr != nil {
					err = herr
				}
			case <-time.After(time.Second):
			}
			return control.Exit{}, lost(err)
		case m := <-msgs:
			switch m.Type {
			case control.MsgStarted:
				// Started is the run's own event, once; the guest may send the frame again.
				if h.Started != nil && !started {
					started = true
					h.Started(m.Pid)
				}
			case control.MsgLog:
				h.Log.Debug("guest", "text", guestText(m.Text))
			case control.MsgExit:
				if m.Exit == nil {
					sess.Close()
					copies.Wait()
					return control.Exit{}, fmt.Errorf("%w: exit frame without a status", ErrSessionLost)
				}
				// The guest closed stdout and stderr before the exit frame, so these
				// copies end once the bytes already in flight are written.
				return *m.Exit, waitCopies()
			}
		}
	}
}

// drain kills the command and waits up to d for the guest to report its exit, which it
// does once the command's changes are handed back.
func drain(ctl *control.Conn, msgs <-chan control.Message, recvErr <-chan error, d time.Duration) {
	_ = ctl.Send(control.Message{Type: control.MsgSignal, Signal: 9})
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		select {
		case m := <-msgs:
			if m.Type == control.MsgExit {
				return
			}
		case <-recvErr:
			return
		case <-t.C:
			return
		}
	}
}

// openStreams opens the control stream, sends rs on it, and opens the stdin, stdout and
// stderr streams. Until they are open a cancel of ctx closes the session, so it returns.
func openStreams(ctx context.Context, sess *yamux.Session, rs control.RunSpec) (*control.Conn, [3]net.Conn, error) {
	var streams [3]net.Conn
	stopEarly := context.AfterFunc(ctx, func() { sess.Close() })
	ctlStream, err := control.Open(sess, control.KindCtl)
	if err != nil {
		return nil, streams, err
	}
	ctl := control.NewConn(ctlStream)
	if err := ctl.Send(control.Message{Type: control.MsgRun, Run: &rs}); err != nil {
		return nil, streams, err
	}
	for i, kind := range []string{control.KindStdin, control.KindStdout, control.KindStderr} {
		if streams[i], err = control.Open(sess, kind); err != nil {
			return nil, streams, err
		}
	}
	if !stopEarly() {
		return nil, streams, ctx.Err()
	}
	return ctl, streams, nil
}

// copyStdio copies stdin into the guest and the guest's stdout and stderr out; the
// returned group waits for the output copies.
func copyStdio(streams [3]net.Conn, stdio Stdio, log *slog.Logger) *sync.WaitGroup {
	go func() {
		if stdio.Stdin != nil {
			_, _ = io.Copy(streams[0], stdio.Stdin)
		}
		_ = control.CloseWrite(streams[0])
	}()
	var copies sync.WaitGroup
	for i, w := range []io.Writer{stdio.Stdout, stdio.Stderr} {
		if w == nil {
			w = io.Discard
		}
		src := streams[i+1]
		copies.Go(func() {
			if _, err := io.Copy(w, src); err != nil {
				// Keep reading so the guest is not blocked on a full window, as a
				// command writing into a closed pipe would not hang either.
				log.Debug("session output copy", "err", err)
				_, _ = io.Copy(io.Discard, src)
			}
		})
	}
	return &copies
}

// receive reads control messages until the connection fails or done closes.
func receive(ctl *control.Conn, done <-chan struct{}) (<-chan control.Message, <-chan error) {
	msgs := make(chan control.Message)
	recvErr := make(chan error, 1)
	go func() {
		for {
			m, err := ctl.Recv()
			if err != nil {
				recvErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-done:
				return
			}
		}
	}()
	return msgs, recvErr
}

// forwardControls sends signals and resizes from the hooks until the session ends.
func forwardControls(ctl *control.Conn, h sessionHooks, done <-chan struct{}) {
	sigs, resize := h.Signals, h.Resize
	for {
		select {
		case <-done:
			return
		case sig, ok := <-sigs:
			if !ok {
				sigs = nil
				continue
			}
			_ = ctl.Send(control.Message{Type: control.MsgSignal, Signal: sig})
		case rc, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			_ = ctl.Send(control.Message{Type: control.MsgResize, Rows: rc[0], Cols: rc[1]})
		}
	}
}

// maxGuestStreams bounds the proxy and mcp streams one guest may hold open at once, so a
// hostile guest cannot make the host spend a goroutine and buffers per stream without end.
const maxGuestStreams = 512

// maxClosingStreams bounds the streams the host has closed (refused, or their handler
// returned) that the guest keeps open; each still holds what the guest sends into its
// receive window. A guest past it is hostile and its session ends. The host resets such
// a stream after a minute, so a program that keeps a few sockets its server closed stays
// far below it.
const maxClosingStreams = 256

// hostStreams is what the host opens itself: ctl, stdin, stdout, stderr.
const hostStreams = 4

// acceptBacklog is yamux's default AcceptBacklog: streams the guest opened that the host
// has not accepted yet, which a burst of connections fills without any being hostile.
const acceptBacklog = 256

// errTooManyStreams is why the host ends the session of a guest that holds too many
// streams open.
var errTooManyStreams = errors.New("guest held too many streams open")

// acceptGuestStreams hands guest-opened proxy and mcp streams to their hooks. Anything
// else the guest opens is closed: the guest cannot widen what it may reach. It returns
// errTooManyStreams when it ended the session for holding too many.
func acceptGuestStreams(sess *yamux.Session, h sessionHooks) error {
	slots := make(chan struct{}, maxGuestStreams)
	// The guest can trigger a refusal at will; its warning must not be its own line.
	refusals := lograte.New(lograte.Options{Every: 10 * time.Second, Count: "refused_since_last"}).Logger(h.Log)
	for {
		kind, c, err := control.Accept(sess)
		if n, limit := sess.NumStreams(), hostStreams+maxGuestStreams+acceptBacklog+maxClosingStreams; n > limit {
			h.Log.Warn("guest session ended", "why", "too many streams held open", "streams", n, "max", limit)
			sess.Close()
			return fmt.Errorf("%w: %d, at most %d", errTooManyStreams, n, limit)
		}
		if err != nil {
			if errors.Is(err, control.ErrBadHeader) {
				continue
			}
			return nil
		}
		var fn func(net.Conn)
		switch kind {
		case control.KindProxy:
			fn = h.ProxyConn
		case control.KindMCP:
			fn = h.MCPConn
		default:
			if tag, ok := strings.CutPrefix(kind, control.KindShare); ok && h.ShareConn != nil {
				fn = func(c net.Conn) { h.ShareConn(tag, c) }
			}
			if tag, ok := strings.CutPrefix(kind, control.KindSync); ok && h.SyncConn != nil {
				fn = func(c net.Conn) { h.SyncConn(tag, c) }
			}
		}
		if fn == nil {
			h.Log.Debug("guest stream refused", "kind", guestText(kind))
			c.Close()
			continue
		}
		select {
		case slots <- struct{}{}:
		default:
			refusals.Warn("guest stream refused", "kind", guestText(kind), "why", "too many open streams", "max", maxGuestStreams)
			c.Close()
			continue
		}
		go func() {
			defer func() { <-slots }()
			fn(c)
		}()
	}
}
