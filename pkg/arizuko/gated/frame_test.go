package gated

import (
	"bytes"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// heapInUse is the test process's live heap after a collection.
func heapInUse() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// TestFrameCap is a guest that opens every session its turn may hold and sends each an
// endless JSON-RPC message: the server ends a session once one message passes maxFrame
// instead of buffering it, so the host holds little however many sessions do it. A tool
// call with a message of MaxText still goes through.
func TestFrameCap(t *testing.T) {
	f := newFixture(t, "a")
	turn := Turn{Folder: "a", TurnID: 1, ChatJID: "tg:1"}
	cs := f.connect(t, turn) // binds the socket; one of the sessions
	if out, isErr := call(t, cs, "reply", map[string]any{"text": strings.Repeat("x", MaxText)}); isErr {
		t.Fatalf("reply of MaxText bytes refused: %s", out)
	}
	path := SocketPath(f.data, "a")
	heap0 := heapInUse()
	const sent = 4 << 20 // well past maxFrame
	var wg sync.WaitGroup
	conns := make([]net.Conn, MaxSessions-1)
	cut := make([]bool, len(conns))
	for i := range conns {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		conns[i] = c
		defer c.Close()
		wg.Go(func() {
			c.SetWriteDeadline(time.Now().Add(time.Minute))
			chunk := bytes.Repeat([]byte("a"), 64<<10)
			if _, err := io.WriteString(c, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"reply","arguments":{"text":"`); err != nil {
				return
			}
			for n := 0; n < sent; n += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					cut[i] = true
					return
				}
			}
		})
	}
	wg.Wait()
	grew := heapInUse() - heap0
	t.Logf("heap grew by %d KiB while %d sessions each sent %d MiB of one message", grew>>10, len(conns), sent>>20)
	for i, c := range conns {
		if !cut[i] {
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Read(make([]byte, 1)); err != io.EOF {
				t.Errorf("session %d took %d MiB of one message and is still open (read: %v)", i, sent>>20, err)
			}
		}
	}
	if grew > 16<<20 {
		t.Errorf("heap grew by %d MiB, want under 16 MiB", grew>>20)
	}
}
