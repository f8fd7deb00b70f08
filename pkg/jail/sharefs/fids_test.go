package sharefs

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// rssKiB is the resident set of process pid.
func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	n, ok := rssOf(pid)
	if !ok {
		t.Fatalf("no VmRSS for %d", pid)
	}
	return n
}

// TestFidsBounded is a hostile guest that asks for fids and never clunks one: the share
// server holds maxNodes of them at most, refuses the rest (walks and creates) with
// ENFILE instead of growing, and a clunked fid frees its place.
func TestFidsBounded(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(dir+"/f", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	root, pid := startShare(t, Config{Dir: dir, Log: os.Stderr}, 64<<10)
	rss0 := rssKiB(t, pid)

	// The client clunks a file it no longer references, so every one is kept.
	const attempts = maxNodes + 2000
	var (
		mu      sync.Mutex
		held    []p9.File
		refused int
		other   error
	)
	flood(attempts, func(int) bool {
		_, f, err := root.Walk([]string{"f"})
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err == nil:
			held = append(held, f)
		case errors.Is(err, linux.ENFILE):
			refused++
		default:
			other = err
		}
		return false
	})
	if other != nil {
		t.Fatalf("walk: %v, want success or ENFILE", other)
	}
	// The attached root holds one place.
	if len(held) != maxNodes-1 || refused != attempts-len(held) {
		t.Fatalf("%d walks held, %d refused; want %d held and the other %d refused with ENFILE",
			len(held), refused, maxNodes-1, attempts-(maxNodes-1))
	}
	grew := rssKiB(t, pid) - rss0
	t.Logf("share server grew by %d KiB for %d fids", grew, len(held))
	if limit := memScale * 64 << 10; grew > limit {
		t.Errorf("share server grew by %d KiB for %d fids, want under %d KiB", grew, len(held), limit)
	}

	// A create needs a place of its own: refused, and nothing lands on the host.
	held[0].Close()
	_, d, err := root.Walk(nil)
	if err != nil {
		t.Fatalf("walk after a clunk: %v", err)
	}
	if _, _, _, err := d.Create("new", p9.WriteOnly, 0o644, p9.NoUID, p9.NoGID); !errors.Is(err, linux.ENFILE) {
		t.Errorf("create at the limit: %v, want ENFILE", err)
	}
	if _, err := os.Lstat(dir + "/new"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a refused create left %s/new (lstat: %v)", dir, err)
	}

	// Clunked fids give their places back.
	for _, f := range held[1:101] {
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, _, err := root.Walk([]string{"f"}); err != nil {
			t.Fatalf("walk %d after 100 clunks: %v", i, err)
		}
	}
}

// TestNamesBounded is a hostile guest that tries to remove names that do not exist, a
// new one each time: the 9p library keeps a node for each, so the server grows with
// every try, and it ends the share once it passes its memory limit instead of growing
// on. The guest gets an error for every request from then on.
func TestNamesBounded(t *testing.T) {
	const limit = 32 << 20
	var log bytes.Buffer
	var logMu sync.Mutex
	root, pid := startShare(t, Config{Dir: t.TempDir(), MemLimit: limit, Log: lockedWriter{&logMu, &log}}, 64<<10)
	peak := 0
	const attempts = 400_000 // about six times the limit's worth of names
	var (
		mu    sync.Mutex
		ended error
	)
	sent := flood(attempts, func(i int) bool {
		err := root.UnlinkAt("n"+strconv.Itoa(i), 0)
		mu.Lock()
		defer mu.Unlock()
		if i%5000 == 0 {
			if rss, ok := rssOf(pid); ok {
				peak = max(peak, rss)
			}
		}
		if !errors.Is(err, linux.ENOENT) {
			ended = cmp.Or(ended, fmt.Errorf("unlink %d: %w", i, err))
			return true
		}
		return false
	})
	t.Logf("after %d removals: %v; peak share server RSS %d KiB", sent, ended, peak)
	if ended == nil {
		t.Fatalf("%d removals of names that do not exist all served; the share server's RSS reached %d KiB against a limit of %d KiB",
			attempts, peak, limit>>10)
	}
	if bound := memScale * (limit>>10 + 32<<10); peak > bound {
		t.Errorf("share server RSS reached %d KiB, want under %d KiB", peak, bound)
	}
	if _, _, err := root.Walk(nil); err == nil {
		t.Error("a walk after the share ended succeeded")
	}
	logMu.Lock()
	defer logMu.Unlock()
	if !strings.Contains(log.String(), "past its limit") {
		t.Errorf("share server log %q, want why it ended", log.String())
	}
}

// flood sends requests 1 to n from 8 goroutines, as a guest's kernel keeps many in
// flight, until they are all sent or one of them says stop; it returns how many were.
func flood(n int, req func(i int) (stop bool)) int {
	var (
		mu   sync.Mutex
		next int
		halt bool
		wg   sync.WaitGroup
	)
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				if next == n || halt {
					mu.Unlock()
					return
				}
				next++
				i := next
				mu.Unlock()
				if req(i) {
					mu.Lock()
					halt = true
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return next
}

// rssOf is the resident set of pid in KiB, false once it is gone.
func rssOf(pid int) (int, bool) {
	for l := range bytes.SplitSeq(procStatus(pid), []byte("\n")) {
		if v, ok := bytes.CutPrefix(l, []byte("VmRSS:")); ok {
			n, err := strconv.Atoi(string(bytes.TrimSuffix(bytes.TrimSpace(v), []byte(" kB"))))
			return n, err == nil
		}
	}
	return 0, false
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
