package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// TestApplyPath: the command's PATH is the caller's entries that exist in the guest, in
// order and once each, a relative one looked up against the working directory; files
// and missing directories drop out, and with none left the default PATH stays.
func TestApplyPath(t *testing.T) {
	root := t.TempDir()
	work := filepath.Join(root, "work")
	for _, d := range []string{"go/bin", "work/node_modules/.bin"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "afile"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	goBin := filepath.Join(root, "go/bin")
	tests := []struct {
		name string
		from []string
		want string
	}{
		{"kept in order, missing and files dropped",
			[]string{filepath.Join(root, "missing"), goBin, "node_modules/.bin", filepath.Join(root, "afile"), goBin, "gone/.bin"},
			"PATH=" + goBin + ":node_modules/.bin"},
		{"nothing visible keeps the default", []string{filepath.Join(root, "missing")}, "PATH=/usr/bin:/bin"},
		{"no candidates keeps the caller's own PATH", nil, "PATH=/usr/bin:/bin"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := &control.RunSpec{Dir: work, Env: []string{"PATH=/usr/bin:/bin", "HOME=/root"}, PathFrom: tc.from}
			applyPath(rs)
			want := []string{tc.want, "HOME=/root"}
			if !slices.Equal(rs.Env, want) {
				t.Fatalf("env = %q, want %q", rs.Env, want)
			}
		})
	}
}
