package jail

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/host"
	"golang.org/x/sys/unix"
)

// GC removes what runs under base left behind when their crackbox was killed: the
// claims on QEMU's per-run uids (killing any process still running as one), then their
// run dirs and cgroup leaves. It returns what it removed, with every uid it failed to
// clean up in the error.
func GC(base string) ([]string, error) {
	removed, err := gcVMMUIDs(base)
	return append(removed, gcRuns(base)...), err
}

// gcRuns removes what runs under base left behind when their crackbox was
// killed, which the next run would otherwise sweep: their run dirs (also
// one killed before its QEMU started) and their cgroup leaves. A leaf with
// no run dir under base, a run of another base such as arizuko's, goes only
// once it is empty and older than leafGrace. It returns what it removed.
func gcRuns(base string) []string {
	var removed []string
	// Leaves first: a run dir removed below would make its leaf look foreign.
	for _, parent := range leafParents() {
		leaves, _ := os.ReadDir(parent)
		for _, e := range leaves {
			if !e.IsDir() {
				continue
			}
			leaf := filepath.Join(parent, e.Name())
			_, err := os.Stat(filepath.Join(base, e.Name()))
			orphan := errors.Is(err, os.ErrNotExist)
			if fi, ierr := e.Info(); orphan && (ierr != nil || time.Since(fi.ModTime()) < leafGrace) {
				continue
			}
			if !orphan && (err != nil || ownerAlive(filepath.Join(base, e.Name()))) {
				continue
			}
			// rmdir refuses a leaf that still holds a process.
			if unix.Rmdir(leaf) == nil {
				removed = append(removed, "cgroup "+leaf)
			}
		}
	}
	for _, d := range sweepStale(base) {
		removed = append(removed, "run dir "+d)
	}
	ents, _ := os.ReadDir(base)
	for _, e := range ents {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		d := filepath.Join(base, e.Name())
		// A run's owner lock is taken right after the file is made: one
		// that is young may not be locked yet. A kept crash report has none.
		if st, err := os.Stat(filepath.Join(d, ownerLock)); err != nil || time.Since(st.ModTime()) < leafGrace || ownerAlive(d) || qemuAlive(d) {
			continue
		}
		if os.RemoveAll(d) == nil {
			removed = append(removed, "run dir "+d)
		}
	}
	return removed
}

// qemuAlive reports whether d's qemu.pid names a process that exists.
func qemuAlive(d string) bool {
	b, err := os.ReadFile(filepath.Join(d, "qemu.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && pid > 0 && !errors.Is(unix.Kill(pid, 0), unix.ESRCH)
}

// leafParents are the directories runs make their cgroup leaves in.
func leafParents() []string {
	if os.Geteuid() != 0 {
		return nil
	}
	if host.Cgroup2() {
		return []string{filepath.Join(cgroupRoot, cgroupParent)}
	}
	var out []string
	for _, ctl := range []string{"memory", "pids", "cpu"} {
		out = append(out, filepath.Join(cgroupRoot, ctl, ownCgroupV1(ctl), cgroupParent))
	}
	return out
}
