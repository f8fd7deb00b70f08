package logfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRotatesAtCap(t *testing.T) {
	path := filepath.Join(t.TempDir(), "decisions.jsonl")
	const max = 1000
	l, err := Open(path, max, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	line := []byte(strings.Repeat("x", 99) + "\n")
	const lines = 10_000 // 1 MB written into a 1000-byte cap
	for i := range lines {
		if _, err := l.Write(line); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, p := range []string{path, path + ".1"} {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > max {
			t.Errorf("%s holds %d bytes, cap %d", filepath.Base(p), len(b), max)
		}
		if len(b)%len(line) != 0 || bytes.Count(b, []byte("\n")) != len(b)/len(line) {
			t.Errorf("%s holds a split line", filepath.Base(p))
		}
		total += len(b)
	}
	if total < max {
		t.Errorf("only %d bytes kept, want the newest ~%d", total, max)
	}
	if _, err := l.Write(line); !errors.Is(err, ErrClosed) {
		t.Errorf("write after close: %v", err)
	}
	// Reopening continues the current file and its size.
	l, err = Open(path, max, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	st, _ := os.Stat(path)
	if l.size != st.Size() {
		t.Errorf("reopened at size %d, file has %d", l.size, st.Size())
	}
}

func TestOpenRefusesNonRegular(t *testing.T) {
	if _, err := Open(t.TempDir(), 10, 0o600); err == nil {
		t.Fatal("opened a directory as a log")
	}
	if _, err := Open(filepath.Join(t.TempDir(), "x"), 0, 0o600); err == nil {
		t.Fatal("accepted a zero cap")
	}
}

// Tail reads the newest bytes across a rotation and nothing through a symlink.
func TestTail(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "x.log")
	os.WriteFile(path+".1", []byte("older\nnewer-1\n"), 0o600)
	os.WriteFile(path, []byte("new\n"), 0o600)
	for _, tc := range []struct {
		n    int64
		want string
	}{
		{2, "w\n"},
		{4, "new\n"},
		{12, "newer-1\nnew\n"},
		{100, "older\nnewer-1\nnew\n"},
	} {
		if got := Tail(path, tc.n); got != tc.want {
			t.Errorf("Tail(%d) = %q, want %q", tc.n, got, tc.want)
		}
	}
	os.Symlink(path, filepath.Join(dir, "link"))
	if got := Tail(filepath.Join(dir, "link"), 10); got != "" {
		t.Errorf("Tail through a symlink = %q", got)
	}
	if got := Tail(filepath.Join(dir, "missing"), 10); got != "" {
		t.Errorf("Tail of a missing file = %q", got)
	}
}
