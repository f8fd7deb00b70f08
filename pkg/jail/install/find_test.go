package install

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestFindKernel(t *testing.T) {
	t.Setenv("CRACKBOX_KERNEL", "")
	cache := t.TempDir()
	old := filepath.Join(cache, "kernel-aaa", "vmlinux")
	newer := filepath.Join(cache, "kernel-bbb", "vmlinux")
	for i, p := range []string{old, newer} {
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("\x7fELF"), 0o644)
		ts := time.Now().Add(time.Duration(i-2) * time.Hour)
		os.Chtimes(p, ts, ts)
	}
	if got, err := FindKernel("", cache); err != nil || got != newer {
		t.Fatalf("FindKernel = %q, %v; want the newest %q", got, err, newer)
	}
	if got, err := FindKernel(old, cache); err != nil || got != old {
		t.Fatalf("explicit kernel: %q, %v", got, err)
	}
	// The library reads no environment: the caller's config layer maps CRACKBOX_KERNEL.
	t.Setenv("CRACKBOX_KERNEL", old)
	if got, _ := FindKernel("", cache); got != newer {
		t.Fatalf("FindKernel read CRACKBOX_KERNEL: %q, want the newest %q", got, newer)
	}
	t.Setenv("CRACKBOX_GUEST_INIT", old)
	if got, _ := FindGuestInit(""); got == old {
		t.Fatalf("FindGuestInit read CRACKBOX_GUEST_INIT: %q", got)
	}
	t.Setenv("CRACKBOX_KERNEL", "")
	if _, err := FindKernel(filepath.Join(cache, "missing"), cache); !errors.Is(err, ErrNoKernel) {
		t.Fatalf("missing explicit kernel: %v", err)
	}
	if _, err := os.Stat(SystemKernel); err != nil {
		if _, err := FindKernel("", t.TempDir()); !errors.Is(err, ErrNoKernel) {
			t.Fatalf("no kernel anywhere: %v", err)
		}
	}
}

func TestCacheDir(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", "/home/alice/.cache")
	t.Setenv("SUDO_UID", "")
	t.Setenv("CRACKBOX_CACHE", "/x/cache") // run.cache, mapped by the caller's config
	if got := CacheDir(); got != "/home/alice/.cache/crackbox" {
		t.Fatalf("XDG_CACHE_HOME: %q", got)
	}
	if os.Geteuid() == 0 {
		t.Setenv("SUDO_UID", "1000")
		if got := CacheDir(); filepath.Dir(filepath.Dir(filepath.Dir(got))) == "/home/alice" || got == "/home/alice/.cache/crackbox" {
			t.Fatalf("under sudo the caller's cache was used: %q", got)
		}
	}
}
