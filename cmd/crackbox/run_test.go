package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// crackboxBin builds bin/crackbox once per test process.
func crackboxBin(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "crackbox-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "crackbox")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatalf("go build: %v", binErr)
	}
	return binPath
}

// cliCmd prepares `crackbox run` with the test kernel and guest-init and a clean env.
func cliCmd(t *testing.T, ctx context.Context, dir string, args ...string) *exec.Cmd {
	e := jailtest.Require(t)
	cmd := exec.CommandContext(ctx, crackboxBin(t), append([]string{"run"}, args...)...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"CRACKBOX_KERNEL=" + e.Kernel, "CRACKBOX_GUEST_INIT=" + e.GuestInit, "CRACKBOX_ACCEL=auto",
		"CRACKBOX_RUNS_DIR=" + t.TempDir()}
	// A test that fails before it waits must not leave a run behind: stopped so, the
	// run removes its tap, table and guest itself, even after the test binary exits.
	t.Cleanup(func() {
		if cmd.Process != nil {
			cmd.Process.Signal(syscall.SIGTERM)
		}
	})
	return cmd
}

func slot(t *testing.T) {
	release, err := jailtest.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestCLIRun(t *testing.T) {
	wd := t.TempDir()
	slot(t)
	// -e PATH wins over the caller's PATH the guest would otherwise get.
	cmd := cliCmd(t, context.Background(), wd, "--net", "none", "-e", "FOO=bar", "-e", "HOSTV", "-e", "PATH=/bin:/usr/bin", "--",
		"sh", "-c", `echo "$FOO $HOSTV ${SECRET:-no-secret}"; pwd; echo "$PATH"; echo made > f.txt; echo oops >&2; exit 3`)
	cmd.Env = append(cmd.Env, "HOSTV=from-host", "SECRET=should-not-leak")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if code := exitCode(err); code != 3 {
		t.Fatalf("exit %d (%v), want 3; stderr %q", code, err, errb.String())
	}
	if want := "bar from-host no-secret\n" + wd + "\n/bin:/usr/bin\n"; out.String() != want {
		t.Fatalf("stdout %q, want %q", out.String(), want)
	}
	if !strings.Contains(errb.String(), "oops") {
		t.Errorf("stderr %q lacks the command's stderr", errb.String())
	}
	// Without -q, what the host lacks (tcg, an unconfined VMM) is at most one note line;
	// nothing else of crackbox's own.
	notes := 0
	for _, l := range strings.Split(strings.TrimSpace(errb.String()), "\n") {
		switch {
		case l == "oops":
		case strings.HasPrefix(l, "crackbox: note: "):
			notes++
		default:
			t.Errorf("stderr has a line of crackbox's own besides the note: %q", l)
		}
	}
	if notes > 1 {
		t.Errorf("stderr has %d host notes, want at most one line:\n%s", notes, errb.String())
	}
	if b, _ := os.ReadFile(filepath.Join(wd, "f.txt")); string(b) != "made\n" {
		t.Errorf("workdir file = %q", b)
	}
}

func TestCLIRefusesBadShares(t *testing.T) {
	wd := t.TempDir()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-v", "/:/host", "--", "true"}, "refusing to share /"},
		{[]string{"-v", wd + ":data", "--", "true"}, `guest path "data"`},
		{[]string{"-e", "=x", "--", "true"}, "empty variable name"},
		{[]string{"--memory", "lots", "--", "true"}, "lots"},
		{[]string{"--workdir-sync", "later", "--", "true"}, `workdir_sync: invalid value: "later": use one of live, exit`},
	} {
		cmd := cliCmd(t, context.Background(), wd, append([]string{"--net", "none"}, c.args...)...)
		var errb bytes.Buffer
		cmd.Stderr = &errb
		err := cmd.Run()
		if code := exitCode(err); code != 125 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%q: exit %d stderr %q; want 125 and %q", c.args, code, errb.String(), c.want)
		}
	}
}

// outputWatcher collects output and lets a test wait for a substring.
type outputWatcher struct{ nettest.Buffer }

func (w *outputWatcher) wait(t *testing.T, s string, d time.Duration) {
	t.Helper()
	if !eventually.Within(d, func() bool { return strings.Contains(w.String(), s) }) {
		t.Fatalf("no %q within %s; output %q", s, d, w.String())
	}
}

func TestCLIPTYResize(t *testing.T) {
	wd := t.TempDir()
	slot(t)
	cmd := cliCmd(t, context.Background(), wd, "--net", "none", "-t", "-i", "--",
		"sh", "-c", `echo "size $(stty size)"; while [ "$(stty size)" = "20 70" ]; do sleep 0.1; done
read x; echo "size $(stty size) got $x"`)
	ptm, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 20, Cols: 70})
	if err != nil {
		t.Fatal(err)
	}
	defer ptm.Close()
	out := &outputWatcher{}
	go io.Copy(out, ptm)
	out.wait(t, "size 20 70", 2*time.Minute)
	// Setsize on the pty makes the host kernel send SIGWINCH to crackbox.
	if err := pty.Setsize(ptm, &pty.Winsize{Rows: 40, Cols: 132}); err != nil {
		t.Fatal(err)
	}
	ptm.Write([]byte("hello\r")) // the guest reads it once it has seen the new size
	out.wait(t, "size 40 132 got hello", time.Minute)
	if code := exitCode(cmd.Wait()); code != 0 {
		t.Fatalf("exit %d; output %q", code, out.String())
	}
}

func TestCLICtrlC(t *testing.T) {
	wd := t.TempDir()
	slot(t)
	cmd := cliCmd(t, context.Background(), wd, "--net", "none", "--",
		"sh", "-c", `trap 'echo got-int' INT; echo ready; while :; do sleep 0.2; done`)
	out, errb := &outputWatcher{}, &outputWatcher{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.wait(t, "ready", 2*time.Minute)
	cmd.Process.Signal(syscall.SIGINT)
	out.wait(t, "got-int", time.Minute)
	// A second Ctrl-C within 2 s stops the guest even though the command ignores it. Two
	// back to back: if got-int came later than 2 s after the first, the first of these
	// starts a new pair and the second completes it.
	cmd.Process.Signal(syscall.SIGINT)
	cmd.Process.Signal(syscall.SIGINT)
	code := exitCode(cmd.Wait())
	if code != 130 || !strings.Contains(errb.String(), "second Ctrl-C") {
		t.Fatalf("exit %d stderr %q; want 130 and a note", code, errb.String())
	}
}

// TestCLICtrlCKeepsChanges: in the default workdir mode (synced at exit) one Ctrl-C ends
// the command, and what it wrote in the workdir still reaches the host.
func TestCLICtrlCKeepsChanges(t *testing.T) {
	wd := t.TempDir()
	slot(t)
	cmd := cliCmd(t, context.Background(), wd, "--net", "none", "--",
		"sh", "-c", `echo kept > out.txt; echo ready; exec sleep 600`)
	out, errb := &outputWatcher{}, &outputWatcher{}
	cmd.Stdout, cmd.Stderr = out, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out.wait(t, "ready", 2*time.Minute)
	if _, err := os.Stat(filepath.Join(wd, "out.txt")); !os.IsNotExist(err) {
		t.Fatalf("out.txt on the host before the command ended (%v): the workdir is not synced at exit", err)
	}
	cmd.Process.Signal(syscall.SIGINT)
	if code := exitCode(cmd.Wait()); code != 130 {
		t.Fatalf("exit %d stderr %q; want 130", code, errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(wd, "out.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("out.txt after Ctrl-C: %q, %v", b, err)
	}
}
