package main

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// applyPath sets the command's PATH to the caller's entries that exist in the guest once
// its filesystem is built: a tool on the host's PATH under /usr, /opt, the workdir or a
// volume is found, and a directory the guest cannot see is left out. Env's PATH stays
// when no entry exists or the caller chose PATH itself (no PathFrom).
func applyPath(rs *control.RunSpec) {
	if len(rs.PathFrom) == 0 {
		return
	}
	kept := guestPath(rs.PathFrom, rs.Dir, func(p string) bool {
		fi, err := os.Stat(p)
		return err == nil && fi.IsDir()
	})
	if len(kept) == 0 {
		return
	}
	entry := "PATH=" + strings.Join(kept, ":")
	for i, e := range rs.Env {
		if strings.HasPrefix(e, "PATH=") {
			rs.Env[i] = entry
			return
		}
	}
	rs.Env = append(rs.Env, entry)
}

// guestPath keeps the entries of from that isDir accepts, in order and once each; a
// relative entry is looked up against dir, the command's working directory.
func guestPath(from []string, dir string, isDir func(string) bool) []string {
	var kept []string
	seen := map[string]bool{}
	for _, d := range from {
		if d == "" || seen[d] {
			continue
		}
		p := d
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if isDir(p) {
			kept = append(kept, d)
			seen[d] = true
		}
	}
	return kept
}
