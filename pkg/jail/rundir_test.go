package jail

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

func TestRunDir(t *testing.T) {
	base := t.TempDir()
	rd, err := newRunDir(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{rd.Dir, rd.VM} {
		st, err := os.Stat(d)
		if err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("%s: %v mode %v, want 0700", d, err, st.Mode().Perm())
		}
	}
	os.WriteFile(rd.path("console.log"), []byte("boot"), 0o600)
	os.WriteFile(rd.vmPath("ctl.sock"), nil, 0o600)
	rd.remove(true)
	if _, err := os.Stat(rd.path("console.log")); err != nil {
		t.Fatalf("crash keep lost console.log: %v", err)
	}
	if _, err := os.Stat(rd.VM); !os.IsNotExist(err) {
		t.Fatalf("crash keep left the sockets dir: %v", err)
	}
	rd.remove(false)
	if _, err := os.Stat(rd.Dir); !os.IsNotExist(err) {
		t.Fatalf("run dir not removed: %v", err)
	}
}

func TestSweepStale(t *testing.T) {
	base := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(name, pid string) string {
		d := filepath.Join(base, name)
		os.MkdirAll(d, 0o700)
		if pid != "" {
			os.WriteFile(filepath.Join(d, "qemu.pid"), []byte(pid+"\n"), 0o600)
		}
		return d
	}
	stale := mk("stale", strconv.Itoa(dead.Process.Pid))
	live := mk("live", strconv.Itoa(os.Getpid()))
	kept := mk("kept", "")
	sweepStale(base)
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("stale run dir survived: %v", err)
	}
	for _, d := range []string{live, kept} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("%s removed: %v", d, err)
		}
	}
}

func TestPruneCrashDirsKeepsNewest(t *testing.T) {
	base := t.TempDir()
	var reports []string
	for i := range 5 {
		rd, err := newRunDir(base, nil)
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(rd.path("console.log"), []byte("panic"), 0o600)
		rd.remove(true)
		when := time.Now().Add(time.Duration(i-10) * time.Minute)
		os.Chtimes(rd.path("console.log"), when, when)
		reports = append(reports, rd.Dir)
	}
	live, err := newRunDir(base, nil) // no console.log yet, vm/ present: a run in progress
	if err != nil {
		t.Fatal(err)
	}
	pruneCrashDirs(base, 2)
	for i, d := range reports {
		_, err := os.Stat(d)
		if gone := os.IsNotExist(err); gone != (i < 3) {
			t.Errorf("report %d (age %d min): gone=%v, want %v", i, 10-i, gone, i < 3)
		}
	}
	if _, err := os.Stat(live.VM); err != nil {
		t.Errorf("live run dir touched: %v", err)
	}
}

// A run whose QEMU has exited is still its owner's until the owner lets go: a concurrent
// run's sweep must not take its crash report, and a killed owner's dir still goes.
func TestSweepStaleSparesAnOwnedRun(t *testing.T) {
	base := t.TempDir()
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadPid := []byte(strconv.Itoa(dead.Process.Pid) + "\n")

	owned, err := newRunDir(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(owned.path("qemu.pid"), deadPid, 0o600)
	os.WriteFile(owned.path("console.log"), []byte("Kernel panic"), 0o600)

	orphan, err := newRunDir(base, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(orphan.path("qemu.pid"), deadPid, 0o600)
	orphan.lock.Close() // its crackbox was killed: the kernel drops the lock

	sweepStale(base)
	if _, err := os.Stat(owned.path("console.log")); err != nil {
		t.Fatalf("a sweep took the console log of a run still deciding about it: %v", err)
	}
	if _, err := os.Stat(orphan.Dir); !os.IsNotExist(err) {
		t.Errorf("a killed owner's run dir survived the sweep: %v", err)
	}

	owned.remove(true)
	sweepStale(base)
	if _, err := os.Stat(owned.path("console.log")); err != nil {
		t.Fatalf("kept crash report lost: %v", err)
	}
	if _, err := os.Stat(owned.path(ownerLock)); !os.IsNotExist(err) {
		t.Errorf("crash report keeps its owner lock file: %v", err)
	}
}

// TestRunDirBaseFollowsEnv: a run without an explicit base uses the one the environment
// names for every creator.
func TestRunDirBaseFollowsEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(rundir.BaseEnv, dir)
	if got := runDirBase(""); got != dir {
		t.Errorf("runDirBase(\"\") = %s, want %s", got, dir)
	}
}
