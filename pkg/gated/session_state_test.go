package gated

import (
	"os"
	"path/filepath"
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
