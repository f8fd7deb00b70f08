package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A read-write share (a volume or the workdir) of a system directory, or of
// crackbox's cache, run directories or state, is refused with the way out
// named; read-only it is fine, and so is SystemShare.
func TestSystemShareRefused(t *testing.T) {
	cache, runs, state := t.TempDir(), t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(cache, "kernels"), 0o755)
	parent := t.TempDir()
	nested := filepath.Join(parent, "cache")
	os.Mkdir(nested, 0o755)
	base := Spec{Argv: []string{"true"}, CacheDir: cache, RunDirBase: runs, StateDirs: []string{state}}
	refused := []string{"/etc", "/etc/cron.d", "/usr/local/bin", "/var/lib", "/var", filepath.Join(cache, "kernels"), cache, runs, state}
	if _, err := os.Stat("/lib"); err == nil {
		refused = append(refused, "/lib")
	}
	for _, dir := range refused {
		s := base
		s.Volumes = []Volume{{Host: dir, Guest: "/mnt/x"}}
		_, err := makePlan(s, FS9P)
		if !errors.Is(err, ErrSystemShare) || !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), "--allow-system-share") {
			t.Errorf("-v %s:/mnt/x: err = %v, want ErrSystemShare naming --allow-system-share", dir, err)
		}
		s.Volumes[0].ReadOnly = true
		if _, err := makePlan(s, FS9P); err != nil {
			t.Errorf("-v %s:/mnt/x:ro: %v", dir, err)
		}
		s.Volumes[0].ReadOnly = false
		s.SystemShare = true
		if _, err := makePlan(s, FS9P); err != nil {
			t.Errorf("-v %s:/mnt/x with SystemShare: %v", dir, err)
		}
	}
	// A share that holds the cache would let the guest replace it too.
	s := base
	s.CacheDir = nested
	s.Volumes = []Volume{{Host: parent, Guest: "/mnt/x"}}
	if _, err := makePlan(s, FS9P); !errors.Is(err, ErrSystemShare) {
		t.Errorf("a share holding the cache: err = %v", err)
	}
	// The workdir is a share like any other.
	s = base
	s.Workdir = "/etc"
	if _, err := makePlan(s, FS9P); !errors.Is(err, ErrSystemShare) || !strings.Contains(err.Error(), "workdir") {
		t.Errorf("workdir /etc: err = %v", err)
	}
	s.WorkdirRO = true
	if _, err := makePlan(s, FS9P); err != nil {
		t.Errorf("read-only workdir /etc: %v", err)
	}
	// Data below /var and anywhere else is fine.
	s = base
	s.Volumes = []Volume{{Host: t.TempDir(), Guest: "/mnt/x"}}
	if _, err := makePlan(s, FS9P); err != nil {
		t.Errorf("a temp dir: %v", err)
	}
	for _, p := range []string{"/var/tmp", "/var/www", "/var/lib/arizuko", "/var/lib/arizuko/x", "/var/tmp/x", "/libx/y", "/lib64/x", "/etcetera"} {
		if got, want := systemDir(p), map[string]string{"/var/tmp": "/var", "/var/www": "/var", "/var/lib/arizuko": "/var", "/libx/y": "/libx", "/lib64/x": "/lib64"}[p]; got != want {
			t.Errorf("systemDir(%s) = %q, want %q", p, got, want)
		}
	}
}
