package rundir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
)

func TestEnsureRunDirBase(t *testing.T) {
	want := baseMode(os.Geteuid())
	for _, tc := range []struct {
		name    string
		prepare func(t *testing.T, base string)
		mode    os.FileMode // expected mode afterwards; 0 = refused
	}{
		{"missing", func(*testing.T, string) {}, want},
		{"missing parents", nil, want},
		{"too tight for qemu", func(t *testing.T, b string) { mkdirMode(t, b, 0o700) }, want},
		{"readable is left alone", func(t *testing.T, b string) { mkdirMode(t, b, 0o755) }, 0o755 | want},
		{"writable by others", func(t *testing.T, b string) { mkdirMode(t, b, 0o777) }, 0},
		{"sticky and writable", func(t *testing.T, b string) { mkdirMode(t, b, 0o1777) }, 0},
		{"a file", func(t *testing.T, b string) { os.WriteFile(b, nil, 0o600) }, 0},
		{"a symlink to a directory", func(t *testing.T, b string) { os.Symlink(t.TempDir(), b) }, 0},
		{"another user's", func(t *testing.T, b string) {
			testreq.Root(t, "chowns the base to another user")
			mkdirMode(t, b, 0o711)
			if err := os.Chown(b, 65534, 65534); err != nil {
				t.Fatal(err)
			}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := filepath.Join(t.TempDir(), "base")
			if tc.prepare == nil {
				base = filepath.Join(t.TempDir(), "a", "b", "base")
			} else {
				tc.prepare(t, base)
			}
			err := EnsureBase(base)
			if tc.mode == 0 {
				if !errors.Is(err, ErrBase) {
					t.Fatalf("err = %v, want ErrBase", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			fi, err := os.Lstat(base)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != tc.mode {
				t.Errorf("mode %04o, want %04o", got, tc.mode)
			}
		})
	}
}

func mkdirMode(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// TestDefaultBaseFollowsEnv: one variable moves the base for every creator.
func TestDefaultBaseFollowsEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(BaseEnv, dir)
	if got := DefaultBase(); got != dir {
		t.Errorf("DefaultBase() = %s, want %s", got, dir)
	}
}
