package folder

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
