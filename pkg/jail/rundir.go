package jail

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/crackbox/crackbox/internal/hostfile"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// runDir is one run's directory. Dir (0711 when QEMU is unprivileged, else 0700) holds
// console.log, qemu.log and qemu.pid, owned by crackbox; VM (0700, owned by QEMU's uid)
// holds the sockets QEMU must reach: qmp.sock, ctl.sock and the virtiofsd sockets.
type runDir struct {
	ID  string
	Dir string
	VM  string
	// lock is held (flock) for the life of the run so a sweeper in another process can
	// tell a run whose QEMU has just exited from one whose crackbox was killed.
	lock *os.File
}

// ownerLock is the file in a run dir that its live owner holds locked.
const ownerLock = "owner.lock"

// runDirBase is the explicit base, else rundir.DefaultBase.
func runDirBase(explicit string) string {
	if explicit != "" {
		return explicit
	}
	return rundir.DefaultBase()
}

func newRunDir(base string, vmm *vmmIdentity) (*runDir, error) {
	if err := rundir.EnsureBase(base); err != nil {
		return nil, err
	}
	sweepStale(base)
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		return nil, err
	}
	// The files of a run are opened refusing any symlink on their path (a guest can
	// write beside them), so a base reached through one, say /var/run, is resolved first.
	if real, err := filepath.EvalSymlinks(base); err == nil {
		base = real
	}
	rd := &runDir{ID: hex.EncodeToString(b)}
	rd.Dir = filepath.Join(base, rd.ID)
	rd.VM = filepath.Join(rd.Dir, "vm")
	if err := os.Mkdir(rd.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	lock, err := os.OpenFile(rd.path(ownerLock), os.O_CREATE|os.O_RDWR, 0o600)
	if err == nil {
		if err = syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			lock.Close()
		}
	}
	if err != nil {
		os.RemoveAll(rd.Dir)
		return nil, fmt.Errorf("run dir lock: %w", err)
	}
	rd.lock = lock
	if err := os.Mkdir(rd.VM, 0o700); err != nil {
		rd.remove(false)
		return nil, fmt.Errorf("run dir: %w", err)
	}
	if vmm != nil {
		// Mkdir applies the umask; set the modes explicitly.
		if err := os.Chmod(rd.Dir, 0o711); err != nil {
			rd.remove(false)
			return nil, err
		}
		if err := os.Chown(rd.VM, int(vmm.UID), int(vmm.GID)); err != nil {
			rd.remove(false)
			return nil, fmt.Errorf("run dir: %w", err)
		}
	}
	return rd, nil
}

// openRunLog creates a log file in the run directory, never through a symlink.
func openRunLog(path string) (*os.File, error) {
	return hostfile.Create(path, 0o600)
}

func (rd *runDir) path(name string) string   { return filepath.Join(rd.Dir, name) }
func (rd *runDir) vmPath(name string) string { return filepath.Join(rd.VM, name) }

// remove deletes the run dir; keep keeps console.log and qemu.log (for a crash report)
// and removes only the sockets.
// The lock is let go last, once nothing of the live run is left for a sweeper to take.
func (rd *runDir) remove(keep bool) {
	if keep {
		os.RemoveAll(rd.VM)
		os.Remove(rd.path("qemu.pid"))
		os.Remove(rd.path(ownerLock))
	} else {
		os.RemoveAll(rd.Dir)
	}
	if rd.lock != nil {
		rd.lock.Close()
		rd.lock = nil
	}
}

// keptCrashDirs bounds how many crash reports (run dirs kept after a guest crash) stay
// in the run dir base; the oldest go first.
const keptCrashDirs = 10

// sweepStale removes run dirs left by a crackbox that was killed (no process holds their
// owner lock and their qemu.pid names a process that no longer exists) and all but the
// newest keptCrashDirs crash reports. QEMU exiting is not enough: its run is still
// reading the console log and deciding whether to keep it. It returns the dirs removed.
func sweepStale(base string) []string {
	var removed []string
	pruneCrashDirs(base, keptCrashDirs)
	pids, _ := filepath.Glob(filepath.Join(base, "*", "qemu.pid"))
	for _, p := range pids {
		b, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 {
			continue
		}
		if ownerAlive(filepath.Dir(p)) {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			if os.RemoveAll(filepath.Dir(p)) == nil {
				removed = append(removed, filepath.Dir(p))
			}
		}
	}
	return removed
}

// ownerAlive reports whether some process holds dir's owner lock. A dir without one
// (made by an older crackbox) is judged by its qemu.pid alone; one this user cannot
// open is left alone.
func ownerAlive(dir string) bool {
	f, err := os.OpenFile(filepath.Join(dir, ownerLock), os.O_RDWR|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil
}

// pruneCrashDirs removes all but the newest keep crash reports. A kept dir is one whose
// vm/ subdir and qemu.pid are gone; a live run always has vm/ until it ends.
func pruneCrashDirs(base string, keep int) {
	entries, err := os.ReadDir(base)
	if err != nil {
		return
	}
	type kept struct {
		dir string
		mod int64
	}
	var dirs []kept
	for _, e := range entries {
		if !e.IsDir() || strings.HasPrefix(e.Name(), ".") {
			continue
		}
		d := filepath.Join(base, e.Name())
		if _, err := os.Stat(filepath.Join(d, "vm")); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "qemu.pid")); !errors.Is(err, os.ErrNotExist) {
			continue
		}
		fi, err := os.Stat(filepath.Join(d, "console.log"))
		if err != nil {
			continue // not a crash report of ours
		}
		dirs = append(dirs, kept{d, fi.ModTime().UnixNano()})
	}
	if len(dirs) <= keep {
		return
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].mod > dirs[j].mod })
	for _, k := range dirs[keep:] {
		os.RemoveAll(k.dir)
	}
}
