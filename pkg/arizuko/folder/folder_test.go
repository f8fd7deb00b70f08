package folder

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	cases := []struct {
		name string
		ok   bool
	}{
		{"corp", true},
		{"corp/eng/sre", true},
		{"a.b/c_d/e-f", true},
		{"", false},
		{"/etc", false},
		{"corp/", false},
		{"corp//eng", false},
		{"corp/./eng", false},
		{"corp/../etc", false},
		{"..", false},
		{"corp/*", false},
		{"**", false},
		{"corp\\eng", false},
		{"corp\x00eng", false},
		{"corp eng", false},
		{"{sender}", false},
		{strings.Repeat("a", MaxSegment), true},
		{strings.Repeat("a", MaxSegment+1), false},
		{strings.Repeat("a/", MaxDepth) + "a", false},
	}
	for _, c := range cases {
		err := Validate(c.name)
		if (err == nil) != c.ok {
			t.Errorf("Validate(%q) = %v, want ok=%v", c.name, err, c.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidName) {
			t.Errorf("Validate(%q) error %v does not wrap ErrInvalidName", c.name, err)
		}
	}
}

func TestWithinAndAncestors(t *testing.T) {
	if !Within("corp/eng", "corp") || !Within("corp", "corp") || Within("corp/eng", "corp/e") || Within("corpx", "corp") {
		t.Fatal("Within compares whole segments")
	}
	got := strings.Join(Ancestors("a/b/c"), ",")
	if got != "a,a/b,a/b/c" {
		t.Fatalf("Ancestors = %s", got)
	}
	if Parent("a/b/c") != "a/b" || Parent("a") != "" {
		t.Fatal("Parent")
	}
}

func TestPathEscapes(t *testing.T) {
	data := t.TempDir()
	outside := t.TempDir()
	p, err := Ensure(data, "corp/eng")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(data, "folders", "corp", "eng"); p != want {
		t.Fatalf("Ensure = %s, want %s", p, want)
	}
	if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
		t.Fatalf("folder dir not created: %v", err)
	}
	// A symlink planted inside the tree pointing out of the data dir.
	if err := os.Symlink(outside, filepath.Join(data, "folders", "corp", "leak")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"../etc", "/etc/passwd", "corp/../../x", "corp/leak", "corp/leak/inner"} {
		if _, err := Path(data, name); err == nil {
			t.Errorf("Path(%q) resolved, want refusal", name)
		}
		if _, err := Ensure(data, name); err == nil {
			t.Errorf("Ensure(%q) succeeded, want refusal", name)
		}
	}
	if _, err := Ensure(data, "corp/leak/inner"); !errors.Is(err, ErrEscape) {
		t.Errorf("symlink escape error = %v, want ErrEscape", err)
	}
	if entries, _ := os.ReadDir(outside); len(entries) != 0 {
		t.Fatalf("something was created outside the data dir: %v", entries)
	}
	// A file where a directory should be is refused too.
	if err := os.WriteFile(filepath.Join(data, "folders", "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(data, "file/x"); !errors.Is(err, ErrEscape) {
		t.Errorf("file component error = %v, want ErrEscape", err)
	}
}

func TestRootSymlinkRefused(t *testing.T) {
	data := t.TempDir()
	if err := os.Symlink(t.TempDir(), filepath.Join(data, "folders")); err != nil {
		t.Fatal(err)
	}
	if _, err := Path(data, "a"); !errors.Is(err, ErrEscape) {
		t.Fatalf("Path: %v", err)
	}
	if _, err := Ensure(data, "a"); !errors.Is(err, ErrEscape) {
		t.Fatalf("Ensure: %v", err)
	}
}

func TestHomeName(t *testing.T) {
	long := strings.Repeat(strings.Repeat("a", MaxSegment)+"/", MaxDepth-1) + "b"
	if err := Validate(long); err != nil {
		t.Fatal(err)
	}
	// '%' and '~' are not legal in names, which keeps the escape injective.
	for _, n := range []string{"a%2Fb", "a~b"} {
		if Validate(n) == nil {
			t.Fatalf("Validate(%q) accepted an escape character", n)
		}
	}
	names := []string{"a", "a/b", "a/b/c", "a.b", "a_2Fb", "corp/eng", "corp/eng/sre", "a_b/c", long, long[:len(long)-1] + "c"}
	seen := map[string]string{}
	for _, n := range names {
		h := HomeName(n)
		if strings.ContainsRune(h, '/') || h == "." || h == ".." || h == "" || len(h) > 255 {
			t.Errorf("HomeName(%q) = %q is not one path element", n, h)
		}
		if prev, ok := seen[h]; ok {
			t.Errorf("HomeName(%q) = HomeName(%q) = %q", n, prev, h)
		}
		seen[h] = n
	}
	if got := HomeName("corp/eng"); got != "corp%2Feng" {
		t.Errorf("HomeName(corp/eng) = %q", got)
	}
	if got := HomeName(long); !strings.HasPrefix(got, "aaaa") || !strings.Contains(got, "~") {
		t.Errorf("long HomeName = %q, want a readable prefix and a hash", got)
	}
}

// Homes are flat siblings under <data>/homes: no folder's home is an ancestor
// of another's, whatever the nesting of the names.
func TestHomesDoNotNest(t *testing.T) {
	data := t.TempDir()
	names := []string{"a", "a/b", "a/b/c", "corp", "corp/eng"}
	homes := map[string]string{}
	for _, n := range names {
		h, err := Ensure(data, n)
		if err != nil {
			t.Fatal(err)
		}
		if h == "" {
			t.Fatal("empty path")
		}
		home, err := Home(data, n)
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Dir(home) != filepath.Join(data, "homes") {
			t.Fatalf("Home(%q) = %s, not directly under <data>/homes", n, home)
		}
		if fi, err := os.Lstat(home); err != nil || !fi.IsDir() {
			t.Fatalf("Ensure(%q) did not create the home: %v", n, err)
		}
		homes[n] = home
	}
	for n, h := range homes {
		for m, g := range homes {
			if n != m && (g == h || strings.HasPrefix(g, h+"/")) {
				t.Errorf("home of %q (%s) contains home of %q (%s)", n, h, m, g)
			}
		}
	}
	// The tree under <data>/folders is host-side metadata: no home lies in it.
	for n, h := range homes {
		if strings.HasPrefix(h, Root(data)+"/") {
			t.Errorf("home of %q lies in the folder tree: %s", n, h)
		}
	}
}

func TestHomeSymlinkRefused(t *testing.T) {
	data := t.TempDir()
	outside := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "homes"), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(data, "homes", "a%2Fb")); err != nil {
		t.Fatal(err)
	}
	if _, err := Home(data, "a/b"); !errors.Is(err, ErrEscape) {
		t.Errorf("Home through a symlinked home: %v", err)
	}
	if _, err := EnsureHome(data, "a/b"); !errors.Is(err, ErrEscape) {
		t.Errorf("EnsureHome through a symlinked home: %v", err)
	}
	data2 := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(data2, "homes")); err != nil {
		t.Fatal(err)
	}
	if _, err := EnsureHome(data2, "a"); !errors.Is(err, ErrEscape) {
		t.Errorf("EnsureHome through a symlinked homes root: %v", err)
	}
	if e, _ := os.ReadDir(outside); len(e) != 0 {
		t.Fatalf("created outside: %v", e)
	}
	if _, err := Home(data, "../x"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("Home(../x) = %v", err)
	}
}

// A removed folder's home goes where no folder's home can be, so a folder
// re-created under its name starts empty and no guest is given the old files.
func TestRetireHome(t *testing.T) {
	data := t.TempDir()
	if p, err := RetireHome(data, "users/alice", time.Unix(0, 1)); err != nil || p != "" {
		t.Fatalf("retiring a home never made: %q %v", p, err)
	}
	home, err := EnsureHome(data, "users/alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "memory.md"), []byte("old tenant"), 0o600); err != nil {
		t.Fatal(err)
	}
	moved, err := RetireHome(data, "users/alice", time.Unix(0, 42))
	if err != nil {
		t.Fatal(err)
	}
	want := filepath.Join(HomesRoot(data), RemovedHomes, "users%2Falice-42")
	if moved != want {
		t.Fatalf("moved to %s, want %s", moved, want)
	}
	if b, err := os.ReadFile(filepath.Join(moved, "memory.md")); err != nil || string(b) != "old tenant" {
		t.Fatalf("moved home lost its file: %q %v", b, err)
	}
	if fi, err := os.Stat(filepath.Dir(moved)); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("removed homes dir: %v %v", fi, err)
	}
	again, err := EnsureHome(data, "users/alice")
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(again); len(ents) != 0 {
		t.Fatalf("re-created home holds %v", ents)
	}
	// No valid name, however long, has a home that is the removed homes dir.
	for _, name := range []string{RemovedHomes, "#removed", ".removed", strings.Repeat("a/", 15) + strings.Repeat("b", 64)} {
		if p, err := Home(data, name); err == nil && (strings.Contains(HomeName(name), "#") || filepath.Base(p) == RemovedHomes) {
			t.Errorf("folder %q has home %s", name, p)
		}
	}
}
