package jail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/control"
	"github.com/crackbox/crackbox/pkg/jail/guest"
)

// socketPair is the byte stream guest-init and the host share, here a unix socketpair.
func socketPair(t *testing.T) (host, guestEnd net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conn := func(fd int, name string) net.Conn {
		f := os.NewFile(uintptr(fd), name)
		defer f.Close()
		c, err := net.FileConn(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	return conn(fds[0], "host"), conn(fds[1], "guest")
}

type result struct {
	exit      control.Exit
	err       error
	guestExit control.Exit
	guestErr  error
}

// runBoth runs both ends of a session: pkg/jail/guest as the guest, runSession as the host.
func runBoth(t *testing.T, ctx context.Context, rs control.RunSpec, stdio Stdio, h sessionHooks, cfg guest.Config) result {
	t.Helper()
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
	}
	hostEnd, guestEnd := socketPair(t)
	var r result
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.guestExit, r.guestErr = guest.Serve(context.Background(), guestEnd, cfg)
	}()
	r.exit, r.err = runSession(ctx, hostEnd, rs, stdio, h)
	hostEnd.Close()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("guest side did not return after the host closed the session")
	}
	return r
}

func spec(argv ...string) control.RunSpec {
	return control.RunSpec{
		Argv: argv,
		Env:  []string{"PATH=" + os.Getenv("PATH"), "HOME=/tmp"},
		Dir:  "/",
		UID:  os.Getuid(),
		GID:  os.Getgid(),
	}
}

func TestSessionExitStatus(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "not-exec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		argv []string
		want control.Exit
	}{
		{"zero", []string{"true"}, control.Exit{Code: 0}},
		{"one", []string{"false"}, control.Exit{Code: 1}},
		{"forty-two", []string{"sh", "-c", "exit 42"}, control.Exit{Code: 42}},
		{"not found", []string{"crackbox-no-such-command"}, control.Exit{Code: 127, Error: control.ExecNotFound}},
		{"not found by path", []string{"/nonexistent/bin/x"}, control.Exit{Code: 127, Error: control.ExecNotFound}},
		{"not executable", []string{notExec}, control.Exit{Code: 126, Error: control.ExecNotExecutable}},
		{"killed by signal", []string{"sh", "-c", "kill -TERM $$"}, control.Exit{Code: 128 + 15, Signal: 15}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBoth(t, nil, spec(tc.argv...), Stdio{}, sessionHooks{}, guest.Config{ExitLinger: time.Second})
			if r.err != nil {
				t.Fatalf("runSession: %v", r.err)
			}
			if r.exit != tc.want {
				t.Fatalf("exit = %+v, want %+v", r.exit, tc.want)
			}
			if r.guestErr != nil || r.guestExit != tc.want {
				t.Fatalf("guest side = %+v, %v", r.guestExit, r.guestErr)
			}
		})
	}
}

func TestSessionStdinRoundTrip(t *testing.T) {
	in := make([]byte, 1<<20)
	if _, err := rand.Read(in); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	r := runBoth(t, nil, spec("cat"), Stdio{Stdin: bytes.NewReader(in), Stdout: &out}, sessionHooks{}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
	if !bytes.Equal(out.Bytes(), in) {
		t.Fatalf("cat returned %d bytes, want the same %d bytes", out.Len(), len(in))
	}
}

func TestSessionStdoutStderrApart(t *testing.T) {
	var out, errb bytes.Buffer
	var pid int
	r := runBoth(t, nil, spec("sh", "-c", "echo to-out; echo to-err >&2; echo more-out"),
		Stdio{Stdout: &out, Stderr: &errb}, sessionHooks{Started: func(p int) { pid = p }}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
	if out.String() != "to-out\nmore-out\n" || errb.String() != "to-err\n" {
		t.Fatalf("stdout %q, stderr %q", out.String(), errb.String())
	}
	if pid <= 0 {
		t.Fatalf("Started hook got pid %d", pid)
	}
}

func TestSessionEnvAndDir(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	rs := spec("sh", "-c", `printf '%s|%s|%s' "$PWD" "$HTTPS_PROXY" "$CRACKBOX_T"`)
	rs.Dir = dir
	rs.Env = append(rs.Env, "CRACKBOX_T=yes", "HTTPS_PROXY=http://stale")
	rs.Net.ProxyURL = "http://10.0.0.1:3128"
	r := runBoth(t, nil, rs, Stdio{Stdout: &out}, sessionHooks{}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
	if want := dir + "|http://10.0.0.1:3128|yes"; out.String() != want {
		t.Fatalf("output %q, want %q", out.String(), want)
	}
}

func TestSessionSetupFailure(t *testing.T) {
	cases := []struct {
		name    string
		rs      control.RunSpec
		prepare func(context.Context, *control.RunSpec) error
		want    string
	}{
		{"prepare fails", spec("true"), func(context.Context, *control.RunSpec) error { return errors.New("mount /usr: no such tag") }, "mount /usr"},
		{"missing dir", func() control.RunSpec { rs := spec("true"); rs.Dir = "/nonexistent/dir"; return rs }(), nil, "/nonexistent/dir"},
		{"empty argv", spec(), nil, "empty argv"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := runBoth(t, nil, tc.rs, Stdio{}, sessionHooks{}, guest.Config{Prepare: tc.prepare})
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.exit.Code != guest.SetupExitCode || !strings.HasPrefix(r.exit.Error, "setup: ") || !strings.Contains(r.exit.Error, tc.want) {
				t.Fatalf("exit = %+v, want code %d and an error naming %q", r.exit, guest.SetupExitCode, tc.want)
			}
		})
	}
}

// lineWaiter is a Writer that lets a test wait until some text has been written.
type lineWaiter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	ch  chan struct{}
}

func newLineWaiter() *lineWaiter { return &lineWaiter{ch: make(chan struct{}, 64)} }

func (w *lineWaiter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	select {
	case w.ch <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *lineWaiter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

func (w *lineWaiter) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for !strings.Contains(w.String(), s) {
		select {
		case <-w.ch:
		case <-deadline:
			t.Fatalf("output never contained %q; got %q", s, w.String())
		}
	}
}

func TestSessionPTYSizeAndResize(t *testing.T) {
	// The background sleep also keeps the pty open after the shell exits, which the guest
	// must not wait for.
	rs := spec("sh", "-c", `trap 'stty size; exit 7' WINCH; stty size; [ -t 0 ] && [ -t 1 ] && echo tty-ok; sleep 30 & wait`)
	rs.TTY, rs.Rows, rs.Cols = true, 33, 101
	out := newLineWaiter()
	resize := make(chan [2]uint16, 1)
	go func() {
		out.waitFor(t, "tty-ok")
		resize <- [2]uint16{40, 120}
	}()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	r := runBoth(t, nil, rs, Stdio{Stdin: stdinR, Stdout: out}, sessionHooks{Resize: resize}, guest.Config{})
	if r.err != nil || r.exit.Code != 7 {
		t.Fatalf("exit = %+v, err = %v; output %q", r.exit, r.err, out.String())
	}
	got := out.String()
	if !strings.Contains(got, "33 101\r\n") || !strings.Contains(got, "40 120\r\n") {
		t.Fatalf("pty output %q: want the initial size 33 101 and the resized 40 120", got)
	}
}

func TestSessionSignalForwarding(t *testing.T) {
	sigs := make(chan int, 1)
	h := sessionHooks{Signals: sigs, Started: func(int) { sigs <- int(syscall.SIGINT) }}
	r := runBoth(t, nil, spec("sleep", "600"), Stdio{}, h, guest.Config{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.exit.Signal != int(syscall.SIGINT) {
		t.Fatalf("exit = %+v, want killed by SIGINT", r.exit)
	}
}

func TestSessionCancelPowersOff(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h := sessionHooks{Started: func(int) { cancel() }}
	r := runBoth(t, ctx, spec("sleep", "30"), Stdio{}, h, guest.Config{})
	if !errors.Is(r.err, context.Canceled) {
		t.Fatalf("runSession err = %v, want context.Canceled", r.err)
	}
	if !errors.Is(r.guestErr, guest.ErrPoweroff) {
		t.Fatalf("guest err = %v, want ErrPoweroff", r.guestErr)
	}
}

func TestSessionLostWithoutExit(t *testing.T) {
	hostEnd, guestEnd := socketPair(t)
	defer hostEnd.Close()
	go func() {
		// A guest that accepts the session and then dies, like a kernel panic.
		buf := make([]byte, 512)
		_, _ = guestEnd.Read(buf)
		guestEnd.Close()
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := runSession(ctx, hostEnd, spec("true"), Stdio{}, sessionHooks{})
	if !errors.Is(err, ErrSessionLost) {
		t.Fatalf("err = %v, want ErrSessionLost", err)
	}
}

// echoHook answers one line from the guest with "reply:<line>".
func echoHook(kind string, got chan<- string) func(net.Conn) {
	return func(c net.Conn) {
		defer c.Close()
		line, _ := bufio.NewReader(c).ReadString('\n')
		got <- kind
		fmt.Fprintf(c, "reply:%s", line)
	}
}

func helperSpec(mode, addr string) control.RunSpec {
	rs := spec(os.Args[0], "-test.run=^$")
	rs.Env = append(rs.Env, "CRACKBOX_SESSION_HELPER="+mode, "CRACKBOX_SESSION_ADDR="+addr)
	return rs
}

func TestSessionProxyOnlyListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the guest side listens on this free address
	rs := helperSpec("tcp", addr)
	rs.Net = control.Net{Mode: "proxy-only", ProxyListen: addr}
	got := make(chan string, 1)
	var out bytes.Buffer
	r := runBoth(t, nil, rs, Stdio{Stdout: &out}, sessionHooks{ProxyConn: echoHook("proxy", got)}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v, out %q", r.exit, r.err, out.String())
	}
	if out.String() != "reply:hello from the guest\n" || len(got) != 1 || <-got != "proxy" {
		t.Fatalf("helper printed %q: the connection did not reach ProxyConn", out.String())
	}
}

func TestSessionMCPSocket(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "run", "mcp.sock")
	rs := helperSpec("unix", sock)
	rs.MCPSocket = sock
	got := make(chan string, 1)
	var out bytes.Buffer
	r := runBoth(t, nil, rs, Stdio{Stdout: &out}, sessionHooks{MCPConn: echoHook("mcp", got)}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v, out %q", r.exit, r.err, out.String())
	}
	if out.String() != "reply:hello from the guest\n" || <-got != "mcp" {
		t.Fatalf("helper printed %q: the connection did not reach MCPConn", out.String())
	}
}

func TestSessionRefusesUnwantedGuestStreams(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	rs := helperSpec("tcp", addr)
	rs.Net = control.Net{Mode: "proxy-only", ProxyListen: addr}
	var out bytes.Buffer
	r := runBoth(t, nil, rs, Stdio{Stdout: &out}, sessionHooks{}, guest.Config{})
	if r.err != nil {
		t.Fatal(r.err)
	}
	if r.exit.Code != 3 || out.Len() != 0 {
		t.Fatalf("exit = %+v, out %q: want the helper to see the connection closed without a reply", r.exit, out.String())
	}
}

// sessionHelper is the command the proxy and MCP tests run in the "guest" (TestMain runs
// it when CRACKBOX_SESSION_HELPER is set): it connects to the in-guest listener, sends a
// line and prints the reply.
func sessionHelper(mode string) {
	c, err := net.Dial(mode, os.Getenv("CRACKBOX_SESSION_ADDR"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Fprintln(c, "hello from the guest")
	reply, err := io.ReadAll(c)
	if err != nil || len(reply) == 0 {
		os.Exit(3)
	}
	os.Stdout.Write(reply)
	os.Exit(0)
}

func TestMain(m *testing.M) {
	if mode := os.Getenv("CRACKBOX_SESSION_HELPER"); mode != "" {
		sessionHelper(mode)
	}
	probeJailThreads()
	os.Exit(m.Run())
}

func TestSessionBackgroundProcessDoesNotHoldOutput(t *testing.T) {
	for _, tty := range []bool{false, true} {
		t.Run(fmt.Sprintf("tty=%v", tty), func(t *testing.T) {
			var pid int
			out := newLineWaiter()
			// The subshell ignores the hangup a pty sends when its session leader exits,
			// so it really keeps the output open.
			rs := spec("sh", "-c", `(trap "" HUP; sleep 600) & echo done`)
			rs.TTY = tty
			r := runBoth(t, nil, rs, Stdio{Stdout: out},
				sessionHooks{Started: func(p int) { pid = p }}, guest.Config{})
			// The orphan shares the command's group: still alive, it shows the session
			// ended without waiting for it to close the output.
			alive := pid > 0 && syscall.Kill(-pid, 0) == nil
			if pid > 0 {
				syscall.Kill(-pid, syscall.SIGKILL)
			}
			if r.err != nil || r.exit.Code != 0 || strings.TrimSpace(out.String()) != "done" {
				t.Fatalf("exit = %+v, err = %v, out %q", r.exit, r.err, out.String())
			}
			if !alive {
				t.Fatalf("the background process (group %d) was gone when the session ended: it waited for it", pid)
			}
		})
	}
}

// A hostile guest that reports an exit but never closes stdout cannot hold the host.
func TestSessionExitWithOpenOutputEndsAtDeadline(t *testing.T) {
	hostEnd, guestEnd := socketPair(t)
	defer hostEnd.Close()
	defer guestEnd.Close()
	release := make(chan struct{})
	go func() {
		sess, err := control.Server(guestEnd)
		if err != nil {
			return
		}
		defer sess.Close()
		var ctl *control.Conn
		for i := 0; i < 4; i++ {
			kind, c, err := control.Accept(sess)
			if err != nil {
				return
			}
			if kind == control.KindCtl {
				ctl = control.NewConn(c)
				ctl.Recv()
			}
		}
		ctl.Send(control.Message{Type: control.MsgExit, Exit: &control.Exit{Code: 0}})
		<-release // holds the output open until runSession has returned
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	_, err := runSession(ctx, hostEnd, spec("true"), Stdio{}, sessionHooks{})
	close(release)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want the deadline", err)
	}
}

// Unprivileged, pkg/jail/guest refuses another uid up front rather than letting the failed
// setuid look like a non-executable command.
func TestSessionOtherUIDWithoutRoot(t *testing.T) {
	if testreq.AsNobody(t) {
		return
	}
	rs := spec("true")
	rs.UID, rs.GID = os.Getuid()+1, os.Getgid()+1
	r := runBoth(t, nil, rs, Stdio{}, sessionHooks{}, guest.Config{})
	if r.err != nil || r.exit.Code != guest.SetupExitCode || !strings.Contains(r.exit.Error, "cannot switch to uid") {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
}

func TestSessionRunsAsRequestedUser(t *testing.T) {
	testreq.Root(t, "switches the command to another uid")
	rs := spec("sh", "-c", "id -u; id -g; id -G")
	rs.UID, rs.GID, rs.Groups = 65534, 65534, []int{65534, 4242}
	var out bytes.Buffer
	r := runBoth(t, nil, rs, Stdio{Stdout: &out}, sessionHooks{}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
	if got := out.String(); got != "65534\n65534\n65534 4242\n" {
		t.Fatalf("id printed %q", got)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("reader went away") }

// A host whose stdout fails (crackbox run ... | head -1) must not leave the command
// blocked on a full pipe in the guest.
func TestSessionFailingStdoutDoesNotBlockCommand(t *testing.T) {
	r := runBoth(t, nil, spec("head", "-c", "4000000", "/dev/zero"), Stdio{Stdout: failingWriter{}}, sessionHooks{}, guest.Config{})
	if r.err != nil || r.exit.Code != 0 {
		t.Fatalf("exit = %+v, err = %v", r.exit, r.err)
	}
}

// TestSessionDrainOnDeadline: past its deadline a session with Drain kills the command
// and waits for the guest's exit, so what the guest does before it reports the exit
// (hand back a workdir's changes) happens; without Drain the guest is powered off.
func TestSessionDrainOnDeadline(t *testing.T) {
	for _, drain := range []time.Duration{0, 20 * time.Second} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var before atomic.Bool
		r := runBoth(t, ctx, spec("sleep", "30"), Stdio{}, sessionHooks{Drain: drain},
			guest.Config{BeforeExit: func() { before.Store(true) }})
		cancel()
		if !errors.Is(r.err, context.DeadlineExceeded) {
			t.Fatalf("drain %s: runSession err = %v, want the deadline", drain, r.err)
		}
		if before.Load() != (drain > 0) {
			t.Errorf("drain %s: the guest's BeforeExit ran: %v", drain, before.Load())
		}
	}
}
