package jail

import (
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/proctest"
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
	for claimed := false; !claimed; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		claimed = s.served["w0"]
		s.mu.Unlock()
	}
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
