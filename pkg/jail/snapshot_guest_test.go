package jail_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// TestSnapshotRestore: the first compatible run makes the snapshot, it and a second run
// restore it; each restored guest has its own randomness and the host's clock, writes
// through a 9p workdir slot, carries stdin and the exit code, and keeps the CPU model
// (avx2 under TCG). A corrupt snapshot falls back to a cold boot and the run still
// succeeds.
func TestSnapshotRestore(t *testing.T) {
	jailtest.Require(t)
	// Through sudo the work directory is 9p (QEMU runs as that user), which fits the
	// snapshot layout; as plain root it would be virtio-fs and boot cold.
	t.Setenv("SUDO_UID", "65534")
	t.Setenv("SUDO_GID", "65534")
	cache := t.TempDir()
	os.Chmod(cache, 0o755)

	run := func(name string) (jail.Result, string, string) {
		t.Helper()
		wd := filepath.Join(t.TempDir(), "wd")
		os.Mkdir(wd, 0o777)
		os.Chmod(filepath.Dir(wd), 0o755)
		os.Chmod(filepath.Dir(filepath.Dir(wd)), 0o755)
		os.Chmod(wd, 0o777)
		s := jailtest.Spec(t, "sh", "-c", `cat /proc/sys/kernel/random/uuid; date +%s
grep -qw avx2 /proc/cpuinfo && echo avx2 || echo no-avx2; cat > in.txt; exit 7`)
		s.CacheDir, s.Workdir, s.MemoryMiB = cache, wd, 256
		s.Snapshot = jail.SnapshotOn
		var out, errb bytes.Buffer
		s.Stdin, s.Stdout, s.Stderr = strings.NewReader("hello "+name), &out, &errb
		before := time.Now()
		res, err := jailtest.Run(t, s)
		after := time.Now()
		if err != nil {
			t.Fatalf("%s: Run: %v (stderr %q)", name, err, errb.String())
		}
		if res.Exit != 7 {
			t.Fatalf("%s: exit %d, want 7 (stderr %q)", name, res.Exit, errb.String())
		}
		got, err := os.ReadFile(filepath.Join(wd, "in.txt"))
		if err != nil || string(got) != "hello "+name {
			t.Fatalf("%s: workdir file %q err %v; want the stdin", name, got, err)
		}
		lines := strings.Fields(out.String())
		if len(lines) != 3 {
			t.Fatalf("%s: output %q, want a uuid, a time and the CPU's avx2", name, out.String())
		}
		// The snapshot carries the CPU model it was made with (-cpu max under TCG).
		if res.Accel == jail.AccelTCG && lines[2] != "avx2" {
			t.Fatalf("%s: the guest CPU lacks avx2 under TCG (restored %v)", name, res.Restored)
		}
		// The guest read its clock while Run ran, so a guest on the host's clock reads a
		// second between before and after (date truncates; one more for rounding at boot).
		sec, _ := strconv.ParseInt(lines[1], 10, 64)
		if sec < before.Unix()-1 || sec > after.Unix()+1 {
			t.Fatalf("%s: guest clock %s outside the run's %s .. %s on the host", name,
				time.Unix(sec, 0).UTC(), before.UTC().Truncate(time.Second), after.UTC())
		}
		return res, lines[0], wd
	}

	r1, u1, _ := run("first")
	r2, u2, _ := run("second")
	if !r1.Restored || !r2.Restored {
		t.Fatalf("restored: first %v second %v; want both restored from the snapshot", r1.Restored, r2.Restored)
	}
	if u1 == u2 {
		t.Fatalf("both restored guests produced uuid %s: the kernel rng was not reseeded", u1)
	}
	snaps, _ := filepath.Glob(filepath.Join(cache, "snapshots", "*.snap"))
	if len(snaps) != 1 {
		t.Fatalf("snapshots %v, want one", snaps)
	}

	if err := os.WriteFile(snaps[0], bytes.Repeat([]byte("not a snapshot\n"), 1000), 0o600); err != nil {
		t.Fatal(err)
	}
	r3, _, _ := run("after corruption")
	if r3.Restored {
		t.Fatal("a corrupt snapshot was restored")
	}
	if _, err := os.Stat(snaps[0]); !os.IsNotExist(err) {
		t.Fatalf("the corrupt snapshot is still there (err %v); the next run would retry it", err)
	}
}

// BenchmarkSnapshot compares a cold boot with a snapshot restore for an in-process
// jail.Run (no work directory, 256 MiB, the host view): the wall time of `true`, and
// QEMU's RSS two seconds after an idle command printed ready.
func BenchmarkSnapshot(b *testing.B) {
	jailtest.Require(b)
	// Not under b.TempDir, whose parent is 0700; shared by both modes (one initramfs).
	cache, err := os.MkdirTemp("", "crackbox-bench-cache-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(cache) })
	os.Chmod(cache, 0o755)
	for _, mode := range []string{jail.SnapshotOff, jail.SnapshotOn} {
		b.Run(mode, func(b *testing.B) {
			spec := func(argv ...string) jail.Spec {
				s := jailtest.Spec(b, argv...)
				s.MemoryMiB, s.Snapshot, s.CacheDir = 256, mode, cache
				return s
			}
			if mode == jail.SnapshotOn {
				// The first run makes the snapshot; it is not a sample.
				if res, err := jailtest.Run(b, spec("true")); err != nil || !res.Restored {
					b.Fatalf("warm-up: restored %v err %v", res.Restored, err)
				}
			}
			var walls, boots []time.Duration
			for b.Loop() {
				start := time.Now()
				res, err := jailtest.Run(b, spec("true"))
				walls = append(walls, time.Since(start))
				boots = append(boots, res.Boot)
				if err != nil || res.Exit != 0 || res.Restored != (mode == jail.SnapshotOn) {
					b.Fatalf("exit %d restored %v err %v", res.Exit, res.Restored, err)
				}
			}
			b.ReportMetric(msOf(medianOf(walls)), "wall-median-ms")
			b.ReportMetric(msOf(slicesMin(walls)), "wall-min-ms")
			b.ReportMetric(msOf(medianOf(boots)), "boot-median-ms")
			b.ReportMetric(idleQEMURSS(b, spec("sh", "-c", "echo ready; exec sleep 60")), "qemu-rss-MiB")
		})
	}
}

// idleQEMURSS runs s until it prints ready, waits two seconds and returns QEMU's VmRSS.
func idleQEMURSS(b *testing.B, s jail.Spec) float64 {
	base, err := os.MkdirTemp("", "crackbox-bench-runs-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	os.Chmod(base, 0o755)
	s.RunDirBase = base
	pr, pw := io.Pipe()
	s.Stdout = pw
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := jailtest.RunContext(b, ctx, s)
		pw.Close()
		done <- err
	}()
	buf := make([]byte, 64)
	n, _ := io.ReadAtLeast(pr, buf, 5)
	go io.Copy(io.Discard, pr)
	if !strings.Contains(string(buf[:n]), "ready") {
		b.Fatalf("idle guest printed %q: %v", buf[:n], <-done)
	}
	time.Sleep(2 * time.Second) // the measurement: RSS is read at two seconds idle, not at an event
	var rss float64
	pids, _ := filepath.Glob(filepath.Join(base, "*", "qemu.pid"))
	for _, p := range pids {
		pb, _ := os.ReadFile(p)
		st, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(pb)) + "/status")
		for _, l := range strings.Split(string(st), "\n") {
			if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
				kb, _ := strconv.ParseFloat(f[1], 64)
				rss = kb / 1024
			}
		}
	}
	cancel()
	<-done
	if rss == 0 {
		b.Fatal("no qemu RSS found")
	}
	return rss
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func medianOf(d []time.Duration) time.Duration {
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

func slicesMin(d []time.Duration) time.Duration {
	m := d[0]
	for _, x := range d {
		m = min(m, x)
	}
	return m
}

// TestSnapshotOnRefusesIncompatible: snapshot on names why a run cannot be restored
// instead of silently booting cold; a bad mode is refused too. No guest boots.
func TestSnapshotOnRefusesIncompatible(t *testing.T) {
	jailtest.Require(t)
	for _, c := range []struct {
		name, mode, want string
		edit             func(*jail.Spec)
	}{
		{"rootfs", jail.SnapshotOn, "rootfs", func(s *jail.Spec) { s.RootFS = t.TempDir() }},
		{"bad mode", "sometimes", "use auto, on or off", func(*jail.Spec) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := jailtest.Spec(t, "true")
			s.Snapshot = c.mode
			c.edit(&s)
			res, err := jail.Run(context.Background(), s)
			if !errors.Is(err, jail.ErrBadSpec) || !strings.Contains(err.Error(), c.want) || res.Exit != jail.ExitFailed {
				t.Fatalf("Run: exit %d err %v; want ErrBadSpec naming %q", res.Exit, err, c.want)
			}
		})
	}
}

// TestSnapshotConcurrentFirstRuns: two runs that both find no snapshot make it once
// between them (the lock file), and both restore the one complete file.
func TestSnapshotConcurrentFirstRuns(t *testing.T) {
	jailtest.Require(t)
	cache := t.TempDir()
	os.Chmod(cache, 0o755)
	var logs [2]bytes.Buffer
	results := make(chan error, 2)
	for i := range 2 {
		go func() {
			s := jailtest.Spec(t, "true")
			s.CacheDir, s.MemoryMiB, s.Snapshot = cache, 256, jail.SnapshotOn
			s.Log = slog.New(slog.NewTextHandler(&logs[i], &slog.HandlerOptions{Level: slog.LevelDebug}))
			res, err := jailtest.Run(t, s)
			if err == nil && (res.Exit != 0 || !res.Restored) {
				err = fmt.Errorf("exit %d restored %v", res.Exit, res.Restored)
			}
			results <- err
		}()
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	made := strings.Count(logs[0].String()+logs[1].String(), `msg="snapshot made"`)
	if made != 1 {
		t.Fatalf("the snapshot was made %d times, want once; logs:\n%s\n%s", made, &logs[0], &logs[1])
	}
	left, _ := filepath.Glob(filepath.Join(cache, "snapshots", "*"))
	var snaps []string
	for _, f := range left {
		if strings.HasSuffix(f, ".snap") {
			snaps = append(snaps, f)
		} else if !strings.HasSuffix(f, ".lock") {
			t.Errorf("left in the snapshot dir: %s", f)
		}
	}
	if len(snaps) != 1 {
		t.Fatalf("snapshot files %v, want one", snaps)
	}
}
