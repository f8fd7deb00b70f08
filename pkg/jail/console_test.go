package jail

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/hostfile"
)

// TestConsoleLogCapped floods the console pipe as a chatty guest would: console.log
// and console.log.1 each stay within the cap, the newest output is kept, and tail
// reads across the rotation.
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
	var total int64
	for _, p := range []string{path, path + ".1"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > max {
			t.Errorf("%s is %d bytes, cap %d", filepath.Base(p), st.Size(), max)
		}
		total += st.Size()
	}
	if total < max {
		t.Errorf("only %d bytes kept, want the newest %d at least", total, max)
	}
	b, _ := os.ReadFile(path)
	if !strings.HasSuffix(string(b), "LAST LINE\n") {
		t.Fatalf("console.log does not keep the newest output: ends %q", b[len(b)-min(len(b), 20):])
	}
	if got := (&vm{rd: &runDir{Dir: filepath.Dir(path)}}).tail("console.log", 10); got != "LAST LINE\n" {
		t.Fatalf("tail = %q", got)
	}
}

// TestConsoleLogRefusesPlantedSymlink: a symlink in console.log's place, as a guest
// writing into the run dir could leave, is refused and its target left alone.
func TestConsoleLogRefusesPlantedSymlink(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "victim")
	if err := os.WriteFile(victim, []byte("keep\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "console.log")); err != nil {
		t.Fatal(err)
	}
	c, w, err := startConsoleLog(filepath.Join(dir, "console.log"), 1<<10)
	if !errors.Is(err, hostfile.ErrSymlink) {
		if err == nil {
			w.Write([]byte("written\n"))
			w.Close()
			c.close()
		}
		t.Errorf("startConsoleLog through a planted symlink: err = %v, want %v", err, hostfile.ErrSymlink)
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep\n" {
		t.Errorf("symlink target written: %q", b)
	}
	if got := (&vm{rd: &runDir{Dir: dir}}).tail("console.log", 10); got != "" {
		t.Errorf("tail read through a planted symlink: %q", got)
	}
}
