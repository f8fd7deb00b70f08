package jail

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConsoleLogCapped floods the console pipe as a chatty guest would: the file stays
// under twice the cap, keeps the newest output, and tail reads only the end.
func TestConsoleLogCapped(t *testing.T) {
	path := filepath.Join(t.TempDir(), "console.log")
	const max = 64 << 10
	c, w, err := startConsoleLog(path, max)
	if err != nil {
		t.Fatal(err)
	}
	line := bytes.Repeat([]byte("x"), 999)
	line = append(line, '\n')
	for i := 0; i < 2000; i++ { // ~2 MB
		if _, err := w.Write(line); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write([]byte("LAST LINE\n")); err != nil {
		t.Fatal(err)
	}
	w.Close()
	c.close()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() > 2*max+int64(len(consoleCut)) {
		t.Fatalf("console.log is %d bytes, cap %d", st.Size(), max)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasPrefix(string(b), consoleCut) || !strings.HasSuffix(string(b), "LAST LINE\n") {
		t.Fatalf("console.log does not keep the newest output: starts %q ends %q", b[:40], b[len(b)-20:])
	}
	if got := tailFile(path, 10); got != "LAST LINE\n" {
		t.Fatalf("tail = %q", got)
	}
}
