package jail

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The snapshot store: one file per key in <cache>/snapshots, made once under a lock,
// a failure marker per key, and pruning of snapshots no run has used for a while.

// snapRetryFailed is how long a failure marker holds: within it every run of the key
// boots cold at once instead of paying for another snapshot boot that fails the same way.
// A different QEMU, kernel, initramfs, host CPU or argument is another key and tries again.
const snapRetryFailed = 24 * time.Hour

// errSnapFailedBefore: the key has a fresh failure marker.
var errSnapFailedBefore = errors.New("snapshot failed before on this key")

// failedBefore returns the recorded reason while the marker is fresh.
func (sr *snapRun) failedBefore() (string, bool) {
	st, err := os.Stat(sr.failedPath())
	if err != nil || time.Since(st.ModTime()) > snapRetryFailed {
		return "", false
	}
	b, _ := os.ReadFile(sr.failedPath())
	return strings.TrimSpace(string(b)), true
}

// markFailed records why the key's snapshot failed, unless the run was only cancelled.
func (sr *snapRun) markFailed(ctx context.Context, why error) {
	if ctx.Err() != nil || errors.Is(why, context.Canceled) || errors.Is(why, context.DeadlineExceeded) {
		return
	}
	tmp, err := os.CreateTemp(sr.dir, sr.key+".failed.tmp-*")
	if err != nil {
		return
	}
	_, werr := fmt.Fprintf(tmp, "%s\n", why)
	if cerr := tmp.Close(); werr == nil && cerr == nil && os.Rename(tmp.Name(), sr.failedPath()) == nil {
		sr.log.Debug("snapshot marked failed", "key", sr.key, "for", snapRetryFailed)
		return
	}
	os.Remove(tmp.Name())
}

// ensure returns the snapshot file, making it first if there is none. Concurrent runs
// serialize on a lock file; the file appears only complete (rename).
func (sr *snapRun) ensure(ctx context.Context) (path string, made bool, err error) {
	path = sr.path()
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return path, false, nil
	}
	if why, ok := sr.failedBefore(); ok {
		return "", false, fmt.Errorf("%w: %s", errSnapFailedBefore, why)
	}
	if err := os.MkdirAll(sr.dir, 0o700); err != nil {
		return "", false, err
	}
	lock, err := os.OpenFile(filepath.Join(sr.dir, sr.key+".lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", false, err
	}
	defer lock.Close()
	deadline := time.Now().Add(snapLockTimeout)
	for {
		err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return "", false, fmt.Errorf("snapshot lock: %w", err)
		}
		if time.Now().After(deadline) {
			return "", false, errors.New("snapshot lock: another run is still making it")
		}
		select {
		case <-ctx.Done():
			return "", false, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)
	if st, err := os.Stat(path); err == nil && st.Size() > 0 {
		return path, false, nil
	}
	if why, ok := sr.failedBefore(); ok {
		return "", false, fmt.Errorf("%w: %s", errSnapFailedBefore, why)
	}
	// Holding the lock, any temp file of this key is left by a maker that was killed.
	if old, _ := filepath.Glob(filepath.Join(sr.dir, sr.key+".snap.tmp-*")); len(old) > 0 {
		for _, f := range old {
			os.Remove(f)
		}
	}
	start := time.Now()
	pruneSnapshots(sr.dir, snapMaxIdle)
	if err := sr.make(ctx, path); err != nil {
		sr.markFailed(ctx, fmt.Errorf("make: %w", err))
		return "", false, err
	}
	sr.log.Debug("snapshot made", "key", sr.key, "took", time.Since(start).Round(time.Millisecond))
	return path, true, nil
}

// snapMaxIdle is how long a snapshot may go unused before a new one's maker removes it
// (an old key: a rebuilt kernel or initramfs, an upgraded QEMU, a memory size no longer
// asked for). Each is tens of MB.
const snapMaxIdle = 7 * 24 * time.Hour

// pruneSnapshots removes snapshots in dir unused for longer than maxIdle.
func pruneSnapshots(dir string, maxIdle time.Duration) {
	snaps, _ := filepath.Glob(filepath.Join(dir, "*.snap"))
	for _, p := range snaps {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > maxIdle {
			os.Remove(p)
			os.Remove(strings.TrimSuffix(p, ".snap") + ".lock")
		}
	}
	marks, _ := filepath.Glob(filepath.Join(dir, "*.failed"))
	for _, p := range marks {
		if st, err := os.Stat(p); err == nil && time.Since(st.ModTime()) > maxIdle {
			os.Remove(p)
		}
	}
}
