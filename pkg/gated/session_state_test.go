package gated

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/crackbox/crackbox/pkg/folder"
)

// Forking a topic copies the parent session's regular files inside the home
// and nothing else: links the guest planted are neither followed for reading
// nor for writing.
func TestCopySessionStateStaysInHome(t *testing.T) {
	data := t.TempDir()
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	home, err := folder.EnsureHome(data, "a/b")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(home, ".arizuko", "sessions", "p1")
	if err := os.MkdirAll(filepath.Join(src, "sub"), 0o750); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "sub", "state.json"), []byte("{}"), 0o600)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "leak"))
	os.Symlink(outside, filepath.Join(src, "dirleak"))
	if err := copySessionState(data, "a/b", "p1", "c1"); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(home, ".arizuko", "sessions", "c1")
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "state.json")); err != nil || string(b) != "{}" {
		t.Fatalf("state not copied: %q %v", b, err)
	}
	for _, n := range []string{"leak", "dirleak"} {
		if _, err := os.Lstat(filepath.Join(dst, n)); !os.IsNotExist(err) {
			t.Errorf("%s copied: %v", n, err)
		}
	}

	// The guest swaps .arizuko for a link out of the home: the host neither
	// reads the parent state there nor creates the child's directory there.
	if err := os.RemoveAll(filepath.Join(home, ".arizuko")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(outside, "sessions", "p2"), 0o750); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(outside, "sessions", "p2", "x"), []byte("x"), 0o600)
	if err := os.Symlink(outside, filepath.Join(home, ".arizuko")); err != nil {
		t.Fatal(err)
	}
	copySessionState(data, "a/b", "p2", "c2")
	if _, err := os.Lstat(filepath.Join(outside, "sessions", "c2")); !os.IsNotExist(err) {
		t.Fatalf("host wrote through the guest's symlink: %v", err)
	}
}

// A guest that makes its session state as big as its disk quota allows cannot make a
// fork copy it all: past maxSessionCopy the fork is refused with ErrSessionTooBig,
// leaves no partial child, and the host never holds the file in memory.
func TestCopySessionStateBounded(t *testing.T) {
	data := t.TempDir()
	home, err := folder.EnsureHome(data, "a")
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(home, ".arizuko", "sessions", "p1")
	if err := os.MkdirAll(src, 0o750); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(src, "a.json"), []byte("{}"), 0o600)
	big, err := os.Create(filepath.Join(src, "z.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	big.Truncate(256 << 20) // sparse: costs the test no disk
	big.Close()

	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	err = copySessionState(data, "a", "p1", "c1")
	runtime.ReadMemStats(&m1)
	if !errors.Is(err, ErrSessionTooBig) {
		t.Fatalf("fork of a 256 MiB session state: %v, want ErrSessionTooBig", err)
	}
	if alloc := m1.TotalAlloc - m0.TotalAlloc; alloc > 16<<20 {
		t.Errorf("the refused fork allocated %d MiB", alloc>>20)
	}
	if _, err := os.Lstat(filepath.Join(home, ".arizuko", "sessions", "c1")); !os.IsNotExist(err) {
		t.Errorf("a refused fork left the child's state (lstat: %v)", err)
	}

	// Within the bound, the state is copied whole.
	if err := os.Truncate(filepath.Join(src, "z.jsonl"), 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := copySessionState(data, "a", "p1", "c2"); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(home, ".arizuko", "sessions", "c2", "z.jsonl")); err != nil || st.Size() != 1<<20 {
		t.Fatalf("copied state: %v %v", st, err)
	}
}
