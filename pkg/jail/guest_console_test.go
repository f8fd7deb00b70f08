package jail_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
)

// flagWriter calls fn once the output contains marker.
type flagWriter struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	marker string
	fn     func()
	done   bool
}

func (w *flagWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if !w.done && strings.Contains(w.buf.String(), w.marker) {
		w.done = true
		w.fn()
	}
	return len(p), nil
}

// TestConsoleFloodCapped: guest root floods the serial console with 3 MiB; the host's
// console.log stays within its cap and keeps the newest output.
func TestConsoleFloodCapped(t *testing.T) {
	jailtest.Require(t)
	base, err := os.MkdirTemp("", "crackbox-console-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	s := jailtest.Spec(t, "sh", "-c", `head -c 3145728 /dev/zero | tr '\0' A > /dev/console; echo FLOOD-END > /dev/console; echo flooded; exec sleep 120`)
	s.Root, s.RunDirBase = true, base
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var size int64 = -1
	var tail string
	s.Stdout = &flagWriter{marker: "flooded", fn: func() {
		// The UART drains after the guest's write returned: wait for the end marker.
		go func() {
			defer cancel()
			eventually.Within(time.Minute, func() bool {
				logs, _ := filepath.Glob(filepath.Join(base, "*", "console.log"))
				for _, l := range logs {
					if b, err := os.ReadFile(l); err == nil {
						size, tail = int64(len(b)), string(b[max(0, len(b)-200):])
					}
				}
				return strings.Contains(tail, "FLOOD-END")
			})
		}()
	}}
	_, _ = jailtest.RunContext(t, ctx, s)
	if size < 0 {
		t.Fatal("the guest never finished flooding, or console.log was not found")
	}
	if size > 2<<20+4096 {
		t.Errorf("console.log grew to %d bytes under a 3 MiB flood", size)
	}
	if !strings.Contains(tail, "FLOOD-END") {
		t.Errorf("console.log lost the newest output; ends %q", tail)
	}
}
