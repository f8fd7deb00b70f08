package jail_test

// These tests boot real guests through jailtest (at most two at a time machine-wide).
// Each guest checks as much as stays readable in one place.

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

func TestExitStatus(t *testing.T) {
	jailtest.Require(t)
	cases := []struct {
		name    string
		argv    []string
		exit    int
		signal  int
		execErr bool
		workdir bool // run in a workdir holding run.sh (a script) and garbage, both executable
	}{
		{"zero", []string{"true"}, 0, 0, false, false},
		{"one", []string{"false"}, 1, 0, false, false},
		{"forty-two", []string{"sh", "-c", "exit 42"}, 42, 0, false, false},
		{"not executable", []string{"/etc/hostname"}, jail.ExitNotExecutable, 0, true, false},
		{"not found", []string{"no-such-command-here"}, jail.ExitNotFound, 0, true, false},
		{"killed by SIGTERM", []string{"sh", "-c", "kill -TERM $$"}, 128 + 15, 15, false, false},
		// The command itself read from a share served over the control session: its
		// execve must not wait on guest-init, which serves that share.
		{"script in the workdir", []string{"./run.sh"}, 7, 0, false, true},
		{"garbage in the workdir", []string{"./garbage"}, jail.ExitNotExecutable, 0, true, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := jailtest.Spec(t, c.argv...)
			if c.workdir {
				s.Workdir = t.TempDir()
				os.WriteFile(filepath.Join(s.Workdir, "run.sh"), []byte("#!/bin/sh\nexit 7\n"), 0o755)
				os.WriteFile(filepath.Join(s.Workdir, "garbage"), []byte("not a program\n"), 0o755)
			}
			res, err := jailtest.Run(t, s)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.Exit != c.exit || res.Signal != c.signal || (res.ExecError != "") != c.execErr {
				t.Fatalf("exit %d signal %d execErr %q; want exit %d signal %d execErr %v",
					res.Exit, res.Signal, res.ExecError, c.exit, c.signal, c.execErr)
			}
		})
	}
}

func TestStdioStreams(t *testing.T) {
	jailtest.Require(t)
	t.Run("1MiB stdin round trip", func(t *testing.T) {
		t.Parallel()
		in := make([]byte, 1<<20)
		rand.Read(in)
		s := jailtest.Spec(t, "cat")
		var out bytes.Buffer
		s.Stdin, s.Stdout = bytes.NewReader(in), &out
		res, err := jailtest.Run(t, s)
		if err != nil || res.Exit != 0 {
			t.Fatalf("exit %d err %v", res.Exit, err)
		}
		if !bytes.Equal(out.Bytes(), in) {
			t.Fatalf("stdout differs from stdin: got %d bytes, want %d", out.Len(), len(in))
		}
	})
	t.Run("stdout and stderr apart", func(t *testing.T) {
		t.Parallel()
		s := jailtest.Spec(t, "sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2")
		var out, errb bytes.Buffer
		s.Stdout, s.Stderr = &out, &errb
		res, err := jailtest.Run(t, s)
		if err != nil || res.Exit != 0 {
			t.Fatalf("exit %d err %v", res.Exit, err)
		}
		if out.String() != "out1\nout2\n" || errb.String() != "err1\nerr2\n" {
			t.Fatalf("stdout %q stderr %q", out.String(), errb.String())
		}
	})
}

// lineWriter hands each complete output line to a channel.
type lineWriter struct {
	buf   bytes.Buffer
	all   bytes.Buffer
	lines chan string
}

func newLineWriter() *lineWriter { return &lineWriter{lines: make(chan string, 64)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.all.Write(p)
	w.buf.Write(p)
	for {
		i := bytes.IndexByte(w.buf.Bytes(), '\n')
		if i < 0 {
			break
		}
		line := strings.TrimRight(string(w.buf.Next(i+1)), "\r\n")
		select {
		case w.lines <- line:
		default:
		}
	}
	return len(p), nil
}

// waitLine runs on a helper goroutine, so it reports with Errorf, not Fatalf.
func waitLine(t *testing.T, w *lineWriter, want string, d time.Duration) bool {
	t.Helper()
	timeout := time.After(d)
	for {
		select {
		case l := <-w.lines:
			if strings.Contains(l, want) {
				return true
			}
		case <-timeout:
			t.Errorf("no line %q within %s", want, d)
			return false
		}
	}
}

func TestTTYAndResize(t *testing.T) {
	// The guest waits for the size to change itself, so no host-side pause has to be
	// long enough for the resize to arrive.
	s := jailtest.Spec(t, "sh", "-c", `test -t 0 && test -t 1 && echo is-a-tty; echo size $(stty size)
while [ "$(stty size)" = "24 80" ]; do sleep 0.1; done; read x; echo size $(stty size)`)
	s.TTY, s.Rows, s.Cols = true, 24, 80
	pr, pw := io.Pipe()
	defer pw.Close()
	resize := make(chan [2]uint16, 1)
	out := newLineWriter()
	s.Stdin, s.Stdout, s.Resize = pr, out, resize
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !waitLine(t, out, "size 24 80", 2*time.Minute) {
			pw.Close()
			return
		}
		resize <- [2]uint16{33, 111}
		pw.Write([]byte("\n"))
	}()
	res, err := jailtest.Run(t, s)
	<-done
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v; output %q", res.Exit, err, out.all.String())
	}
	got := out.all.String()
	for _, want := range []string{"is-a-tty", "size 24 80", "size 33 111"} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q: %q", want, got)
		}
	}
}

func TestSignalForwarding(t *testing.T) {
	s := jailtest.Spec(t, "sh", "-c", `trap 'echo got-int; exit 7' INT; echo ready; while :; do sleep 0.2; done`)
	sigs := make(chan int, 1)
	out := newLineWriter()
	s.Stdout, s.Signals = out, sigs
	go func() {
		waitLine(t, out, "ready", 2*time.Minute)
		sigs <- int(syscall.SIGINT)
	}()
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 7 || !strings.Contains(out.all.String(), "got-int") {
		t.Fatalf("exit %d err %v output %q; want the trap to run and exit 7", res.Exit, err, out.all.String())
	}
}

func TestTimeout(t *testing.T) {
	s := jailtest.Spec(t, "sleep", "600")
	s.Timeout = 8 * time.Second
	res, err := jailtest.Run(t, s)
	if !errors.Is(err, jail.ErrTimeout) || res.Exit != jail.ExitFailed {
		t.Fatalf("exit %d err %v; want ErrTimeout and 125", res.Exit, err)
	}
}

func TestGuestPanicIsACrash(t *testing.T) {
	// guest-init is a Go program: a SIGILL sent to it throws, PID 1 exits, the kernel panics.
	s := jailtest.Spec(t, "sh", "-c", "kill -ILL 1; sleep 30; echo survived")
	s.Root = true
	var out bytes.Buffer
	s.Stdout = &out
	res, err := jailtest.RunContext(t, context.Background(), s)
	if !errors.Is(err, jail.ErrGuestCrashed) || res.Exit != jail.ExitFailed {
		t.Fatalf("exit %d err %v stdout %q; want ErrGuestCrashed and 125", res.Exit, err, out.String())
	}
	if res.ConsoleLog == "" || !strings.Contains(err.Error(), res.ConsoleLog) {
		t.Fatalf("error %q does not name the console log %q", err, res.ConsoleLog)
	}
	b, rerr := os.ReadFile(res.ConsoleLog)
	if rerr != nil || !strings.Contains(string(b), "Kernel panic") {
		t.Fatalf("console log %s: %v; lacks the panic", res.ConsoleLog, rerr)
	}
	if !strings.Contains(err.Error(), "Kernel panic") {
		t.Errorf("error does not say why: %v", err)
	}
	os.RemoveAll(res.RunDir)
}

func TestQEMUKilledIsACrash(t *testing.T) {
	base := t.TempDir()
	// QEMU runs as nobody under root and must traverse the run dir base.
	os.Chmod(filepath.Dir(base), 0o711)
	os.Chmod(base, 0o711)
	s := jailtest.Spec(t, "sleep", "600")
	s.RunDirBase = base
	s.Started = func(int) {
		pids, _ := filepath.Glob(filepath.Join(base, "*", "qemu.pid"))
		for _, p := range pids {
			b, _ := os.ReadFile(p)
			var pid int
			if _, err := fmt.Sscan(string(b), &pid); err == nil && pid > 0 {
				syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	res, err := jailtest.Run(t, s)
	if !errors.Is(err, jail.ErrGuestCrashed) || res.Exit != jail.ExitFailed {
		t.Fatalf("exit %d err %v; want ErrGuestCrashed and 125", res.Exit, err)
	}
	if !strings.Contains(err.Error(), "qemu exited") || !strings.Contains(err.Error(), res.ConsoleLog) {
		t.Fatalf("error %q should say qemu exited and name the console log", err)
	}
}
