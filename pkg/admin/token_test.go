package admin

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestToken(t *testing.T) {
	base := t.TempDir()
	path, err := TokenFile(base, "127.0.0.1:3129")
	if err != nil || path != filepath.Join(base, "admin-3129.token") {
		t.Fatalf("TokenFile = %q, %v", path, err)
	}
	if _, err := ReadToken(path); !errors.Is(err, ErrNoToken) {
		t.Errorf("ReadToken before any daemon: %v, want ErrNoToken", err)
	}
	// Whatever was left at the path is replaced, never written through.
	target := filepath.Join(base, "target")
	if err := os.WriteFile(target, []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
	tok, err := WriteToken(path)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(target); string(b) != "keep" {
		t.Errorf("the token was written through a planted link: target holds %q", b)
	}
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm() != 0o600 {
		t.Errorf("token file: %v %v, want a regular file, mode 0600", fi.Mode(), err)
	}
	again, err := WriteToken(path)
	if err != nil || again == tok || len(tok) != 64 {
		t.Errorf("tokens %q then %q (%v): want two fresh 256-bit tokens", tok, again, err)
	}
	if got, err := ReadToken(path); err != nil || got != again {
		t.Errorf("ReadToken = %q, %v, want %q", got, err, again)
	}
	for _, bad := range []string{"127.0.0.1:0", "127.0.0.1", ""} {
		if _, err := TokenFile(base, bad); err == nil {
			t.Errorf("TokenFile(%q) took an address without a bound port", bad)
		}
	}
	if ents, _ := os.ReadDir(base); len(ents) != 2 {
		t.Errorf("base holds %d entries, want the token and the target (no temp files left)", len(ents))
	}
}
