package jail

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/install"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// ErrSystemShare is wrapped when a read-write share is a system directory or
// crackbox's own cache or state, and Spec.SystemShare is not set.
var ErrSystemShare = errors.New("refusing a read-write share of a system directory")

// systemDirs hold what the host runs: guest root writing there would change
// it (a file in /etc/cron.d, a binary in /usr/local/bin). /lib* is matched
// by prefix.
var systemDirs = []string{"/etc", "/usr", "/bin", "/sbin", "/boot", "/opt", "/var"}

// varDataDirs are the places under /var that hold data rather than the
// system's state: what lies below them may be shared read-write (arizuko's
// folder homes, for one).
var varDataDirs = []string{"/var/tmp/", "/var/www/", "/var/home/", "/var/lib/arizuko/"}

// checkSystemShare refuses host, the real path of a read-write share, when
// it lies in a system directory, or is, holds or lies in crackbox's cache
// (kernels, snapshots later runs boot from), its run directories or the
// caller's StateDirs.
func checkSystemShare(host string, s Spec) error {
	if s.SystemShare {
		return nil
	}
	fix := "share it read-only (:ro) or a project directory instead, or pass --allow-system-share"
	if sys := systemDir(host); sys != "" {
		return fmt.Errorf("%w: %w: %s is under %s, where guest root could change what the host runs; %s", ErrBadSpec, ErrSystemShare, host, sys, fix)
	}
	own := []string{s.CacheDir, s.RunDirBase}
	if own[0] == "" {
		own[0] = install.CacheDir()
	}
	if own[1] == "" {
		own[1] = rundir.DefaultBase()
	}
	for _, d := range append(own, s.StateDirs...) {
		if d == "" {
			continue
		}
		d = realDir(d)
		if within(host, d) || within(d, host) {
			return fmt.Errorf("%w: %w: %s is or holds crackbox's own %s, which later runs trust; %s", ErrBadSpec, ErrSystemShare, host, d, fix)
		}
	}
	return nil
}

// systemDir returns the system directory p lies in, or "".
func systemDir(p string) string {
	if first, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/"); strings.HasPrefix(first, "lib") {
		return "/" + first
	}
	for _, d := range varDataDirs {
		if strings.HasPrefix(p, d) {
			return ""
		}
	}
	for _, d := range systemDirs {
		if within(p, d) {
			return d
		}
	}
	return ""
}

// realDir resolves d's symlinks when it exists, so it compares with a
// share's real path.
func realDir(d string) string {
	abs, err := filepath.Abs(d)
	if err != nil {
		return d
	}
	if r, err := filepath.EvalSymlinks(abs); err == nil {
		return r
	}
	return abs
}
