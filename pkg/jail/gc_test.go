package jail

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
)

// gcRuns removes, at once, the run dir and the cgroup leaf of a run whose
// crackbox was killed (here before its QEMU started, which no sweep took),
// and leaves a live run's and a young foreign leaf alone.
func TestGCRunsRemovesDeadRuns(t *testing.T) {
	requireRoot(t)
	if _, err := cgroupSupport(); err != nil {
		testreq.Check(t, err, "cgroup support", "mount a cgroup v2 (or v1 memory/pids) hierarchy")
	}
	base := t.TempDir()
	dead, err := newRunDir(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	dead.lock.Close() // its crackbox was killed: the kernel drops the lock
	old := time.Now().Add(-2 * leafGrace)
	os.Chtimes(dead.path(ownerLock), old, old)
	live, err := newRunDir(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer live.remove(false)
	os.Chtimes(live.path(ownerLock), old, old)
	var leaves []*cgroupLeaf
	for _, name := range []string{dead.ID, live.ID, "foreign-" + dead.ID} {
		l, err := newCgroupLeaf(name, vmmLimits(64, 1))
		if err != nil {
			t.Fatal(err)
		}
		leaves = append(leaves, l)
		defer l.remove()
	}
	removed := gcRuns(base)
	t.Logf("removed %q", removed)
	if _, err := os.Stat(dead.Dir); !os.IsNotExist(err) {
		t.Errorf("dead run dir survived gc: %v", err)
	}
	if !slices.Contains(removed, "run dir "+dead.Dir) {
		t.Errorf("gc did not report the dead run dir: %q", removed)
	}
	for _, d := range leaves[0].dirs {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("dead run's cgroup leaf %s survived gc: %v", d, err)
		}
		if !slices.Contains(removed, "cgroup "+d) {
			t.Errorf("gc did not report %s: %q", d, removed)
		}
	}
	for _, l := range leaves[1:] {
		for _, d := range l.dirs {
			if _, err := os.Stat(d); err != nil {
				t.Errorf("gc removed %s: %v", d, err)
			}
		}
	}
	if _, err := os.Stat(live.VM); err != nil {
		t.Errorf("gc removed a live run's dir: %v", err)
	}
	if strings.Contains(strings.Join(removed, "\n"), live.ID) {
		t.Errorf("gc reports a live run: %q", removed)
	}
}
