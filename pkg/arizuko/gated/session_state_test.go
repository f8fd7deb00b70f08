package gated

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
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

// A state of more entries than maxSessionFiles is refused too, counted as the directory
// is read rather than after listing it whole.
func TestCopySessionStateEntriesBounded(t *testing.T) {
	data := t.TempDir()
	home, err := folder.EnsureHome(data, "a")
	if err != nil {
		t.Fatal(err)
	}
	sub := filepath.Join(home, ".arizuko", "sessions", "p1", "many")
	if err := os.MkdirAll(sub, 0o750); err != nil {
		t.Fatal(err)
	}
	for i := range maxSessionFiles + 1 {
		if err := os.WriteFile(filepath.Join(sub, strconv.Itoa(i)), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := copySessionState(data, "a", "p1", "c1"); !errors.Is(err, ErrSessionTooBig) {
		t.Fatalf("fork of %d entries: %v, want ErrSessionTooBig", maxSessionFiles+1, err)
	}
	if _, err := os.Lstat(filepath.Join(home, ".arizuko", "sessions", "c1")); !os.IsNotExist(err) {
		t.Errorf("a refused fork left the child's state (lstat: %v)", err)
	}
	// The directory "many" is an entry too: with one file fewer it fits exactly.
	os.Remove(filepath.Join(sub, "0"))
	os.Remove(filepath.Join(sub, "1"))
	if err := copySessionState(data, "a", "p1", "c2"); err != nil {
		t.Fatalf("fork of %d entries: %v", maxSessionFiles, err)
	}
}

// fork_topic refuses a child topic that exists before it copies anything, and a fork
// refused for its size leaves no topic behind.
func TestForkRefusals(t *testing.T) {
	row := toolRows["fork_topic"]
	e := newToolEnv(t, row.caller)
	args := row.setup(t, e)
	e.grant(t, "folder:"+row.caller, "mcp:fork_topic", row.scope, acl.Allow)
	cs := e.connect(t, e.turn)
	if text, isErr := call(t, cs, "fork_topic", args); isErr {
		t.Fatalf("first fork: %s", text)
	}
	parent, err := SessionDir(e.data, "corp", "s-parent")
	if err != nil {
		t.Fatal(err)
	}
	sessions := filepath.Dir(parent)
	before, _ := os.ReadDir(sessions)
	if len(before) != 2 {
		t.Fatalf("session dirs after one fork: %d, want the parent and the child", len(before))
	}
	// The parent's state is now past the bound: a fork that copied before it checked
	// the child would answer "too big".
	if err := os.Truncate(filepath.Join(parent, "state.json"), maxSessionCopy+1); err != nil {
		t.Fatal(err)
	}
	if text, isErr := call(t, cs, "fork_topic", args); !isErr || !strings.Contains(text, "already exists") {
		t.Fatalf("second fork onto the same child: isErr=%v %q, want already exists", isErr, text)
	}
	if after, _ := os.ReadDir(sessions); len(after) != len(before) {
		t.Errorf("a refused fork changed the session dirs: %d, then %d", len(before), len(after))
	}

	if text, isErr := call(t, cs, "fork_topic", map[string]any{"parent": "main", "child": "big"}); !isErr || !strings.Contains(text, "too big") {
		t.Fatalf("fork of an oversized state: isErr=%v %q", isErr, text)
	}
	if _, err := e.st.GetSession(context.Background(), "corp", "big"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("a fork refused for its size left topic big: %v", err)
	}
}
