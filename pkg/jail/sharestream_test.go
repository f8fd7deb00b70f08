package jail

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/proctest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/host"
)

// TestStreamSharesPrestarted: every stream share has its server running before the guest
// asks; one tag is served once; a share the guest never mounts has its server ended
// by close, and a stream arriving after close is refused.
func TestStreamSharesPrestarted(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	p := &plan{userShare: []share{
		{Tag: "w0", Host: a, Target: "/w0", FS: FSStream},
		{Tag: "w1", Host: b, Target: "/w1", FS: FSStream, ReadOnly: true},
	}}
	s := newStreamShares(p, 0, io.Discard, slog.New(slog.DiscardHandler))
	s.start()
	if got := proctest.Children("crackbox-share"); len(got) != 2 {
		t.Fatalf("%d share servers running before any stream, want 2", len(got))
	}

	// The guest mounts w0; a second stream for it and one for an unknown tag are closed.
	host, guest := net.Pipe()
	served := make(chan struct{})
	go func() { s.serve("w0", host); close(served) }()
	eventually.True(t, time.Minute, "w0's stream is being served", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.served["w0"]
	})
	for _, tag := range []string{"w0", "nope"} {
		h, g := net.Pipe()
		go s.serve(tag, h)
		if _, err := io.ReadAll(g); err != nil {
			t.Errorf("stream %q: %v", tag, err)
		}
	}
	guest.Close() // the guest unmounts w0
	<-served

	s.close()
	if got := proctest.Children("crackbox-share"); len(got) != 0 {
		t.Errorf("share servers %v still running after close", got)
	}
	h, g := net.Pipe()
	go s.serve("w1", h)
	if _, err := io.ReadAll(g); err != nil {
		t.Errorf("stream after close: %v", err)
	}
}

// TestStreamSharesLowerAsRunUID: as root, the host view's /etc share server runs as the
// run's own uid once the run has claimed one, and as nobody only without a claim.
func TestStreamSharesLowerAsRunUID(t *testing.T) {
	testreq.Root(t, "drops the share server to the run's uid")
	etc := t.TempDir()
	if err := os.Chmod(filepath.Dir(etc), 0o755); err != nil {
		t.Fatal(err)
	}
	p := &plan{lowers: []share{{Tag: "etc", Host: etc, Target: "/etc", FS: FSStream, ReadOnly: true}}}
	const runUID = host.VMMUIDBase + 0xfff1
	for _, c := range []struct {
		name string
		id   *vmmIdentity
		want int
	}{
		{"claimed", &vmmIdentity{UID: runUID, GID: runUID, PerRun: true, claim: &uidClaim{UID: runUID}}, runUID},
		{"unclaimed placeholder", perRunIdentity(nil), nobodyUID},
		{"none", nil, nobodyUID},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newStreamShares(p, 0, io.Discard, slog.New(slog.DiscardHandler))
			s.runAs(c.id)
			s.start()
			defer s.close()
			pids := proctest.Children("crackbox-share")
			if len(pids) != 1 {
				t.Fatalf("%d share servers, want 1", len(pids))
			}
			// The server drops its uid as it confines itself; wait (a loaded machine)
			// until it is under seccomp.
			status := "/proc/" + strconv.Itoa(pids[0]) + "/status"
			eventually.Within(time.Minute, func() bool {
				b, _ := os.ReadFile(status)
				return bytes.Contains(b, []byte("Seccomp:\t2"))
			})
			if uid, ok := procUID(pids[0]); !ok || int(uid) != c.want {
				t.Errorf("host view share server runs as uid %d (%v), want %d", uid, ok, c.want)
			}
		})
	}
}
