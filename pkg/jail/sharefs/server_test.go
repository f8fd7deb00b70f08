package sharefs

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/hugelgupf/p9/p9"
)

// procStatus reads /proc/PID/status; nil once the process is gone or reaped.
func procStatus(pid int) []byte {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	return b
}

// TestStartConfinedBeforeConnect: a server started ahead of the guest is chrooted,
// capability-free and under seccomp before any guest byte reaches it, and Close ends it.
func TestStartConfinedBeforeConnect(t *testing.T) {
	testreq.Root(t, "checks the chroot and the capability drop")
	dir := t.TempDir()
	s, err := Start(Config{Dir: dir, Log: os.Stderr}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pid := s.cmd.Process.Pid
	// Wait (generously: a loaded machine) until the second stage has confined itself.
	var status []byte
	eventually.Within(time.Minute, func() bool {
		status = procStatus(pid)
		return bytes.Contains(status, []byte("Seccomp:\t2"))
	})
	for _, want := range []string{"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2"} {
		if !bytes.Contains(status, []byte(want)) {
			t.Errorf("pre-started share server status lacks %q:\n%s", want, status)
		}
	}
	if r, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/root"); err != nil || r != dir {
		t.Errorf("pre-started share server root is %q (%v), want %s", r, err, dir)
	}
	s.Close()
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("share server %d still exists after Close (kill 0: %v)", pid, err)
	}
	// A stream that arrives after Close is not served: it is closed at once.
	host, guest := net.Pipe()
	go s.Serve(host)
	if _, err := io.ReadAll(guest); err != nil {
		t.Errorf("late stream: %v", err)
	}
}

// TestStartServesOnce: the first connection is served; a second one is closed unread,
// so one server never mixes two guest streams.
func TestStartServesOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Start(Config{Dir: dir, Log: os.Stderr}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	host, guest := net.Pipe()
	done := make(chan struct{})
	go func() { s.Serve(host); close(done) }()
	c, err := p9.NewClient(guest, p9.WithMessageSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := root.Walk([]string{"f"}); err != nil {
		t.Fatalf("walk f: %v", err)
	}

	host2, guest2 := net.Pipe()
	go s.Serve(host2)
	if _, err := io.ReadAll(guest2); err != nil {
		t.Errorf("second stream: %v", err)
	}
	if _, _, err := root.Walk([]string{"f"}); err != nil {
		t.Errorf("first stream broken by the second: %v", err)
	}
	c.Close()
	guest.Close()
	<-done
	s.Close() // after Serve: nothing to do
}
