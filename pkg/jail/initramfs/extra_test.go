package initramfs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/cavaliergopher/cpio"
)

func TestWriteExtraAddsFilesAndParents(t *testing.T) {
	extra := []File{
		{Name: "crackbox-modules/order", Perm: 0o644, Data: []byte("a.ko\n")},
		{Name: "crackbox-modules/a.ko", Perm: 0o600, Data: []byte("module-a")},
	}
	var buf bytes.Buffer
	if err := WriteExtra(&buf, fakeInit, extra); err != nil {
		t.Fatal(err)
	}
	got := map[string]cpio.FileMode{}
	data := map[string]string{}
	var order []string
	r := cpio.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		b, _ := io.ReadAll(r)
		got[h.Name], data[h.Name] = h.Mode, string(b)
		order = append(order, h.Name)
	}
	want := map[string]cpio.FileMode{
		"init":                   cpio.TypeReg | 0o755,
		"crackbox-modules":       cpio.TypeDir | 0o755,
		"crackbox-modules/a.ko":  cpio.TypeReg | 0o600,
		"crackbox-modules/order": cpio.TypeReg | 0o644,
	}
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("%s mode %o, want %o", name, got[name], mode)
		}
	}
	if data["crackbox-modules/a.ko"] != "module-a" || data["crackbox-modules/order"] != "a.ko\n" {
		t.Errorf("extra contents %q", data)
	}
	for i, n := range order {
		if n == "crackbox-modules" {
			break
		}
		if filepath.Dir(n) == "crackbox-modules" {
			t.Fatalf("%s (entry %d) comes before its directory: %v", n, i, order)
		}
	}
}

func TestWriteExtraRejectsBadNames(t *testing.T) {
	for _, name := range []string{"", "/abs", "../up", "a/../../b", "init", "dev/console", "a//b"} {
		err := WriteExtra(io.Discard, fakeInit, []File{{Name: name, Perm: 0o644}})
		if err == nil {
			t.Errorf("name %q accepted", name)
		}
	}
}

func TestEnsureExtraKeyCoversFiles(t *testing.T) {
	dir := t.TempDir()
	gi := filepath.Join(dir, "guest-init")
	if err := os.WriteFile(gi, fakeInit, 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	plain, err := EnsureExtra(gi, cache, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p2, _ := Ensure(gi, cache); p2 != plain {
		t.Errorf("no extras: %s, want Ensure's %s", plain, p2)
	}
	a, err := EnsureExtra(gi, cache, []File{{Name: "m/x.ko", Perm: 0o644, Data: []byte("one")}})
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := EnsureExtra(gi, cache, []File{{Name: "m/x.ko", Perm: 0o644, Data: []byte("one")}})
	b, _ := EnsureExtra(gi, cache, []File{{Name: "m/x.ko", Perm: 0o644, Data: []byte("two")}})
	c, _ := EnsureExtra(gi, cache, []File{{Name: "m/y.ko", Perm: 0o644, Data: []byte("one")}})
	if a != a2 {
		t.Errorf("same extras, different archives: %s %s", a, a2)
	}
	if a == plain || a == b || a == c || b == c {
		t.Errorf("cache keys collide: plain %s a %s b %s c %s", plain, a, b, c)
	}
	raw, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(raw, []byte("m/x.ko\x00")) || !bytes.Contains(raw, []byte("two")) {
		t.Errorf("archive %s lacks the extra file", b)
	}
}
