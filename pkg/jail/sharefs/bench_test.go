package sharefs

import (
	"archive/tar"
	"bytes"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// BenchmarkRequest is the cost of one 9p request through a real, confined share
// server: a stat of the root, and a 4 KiB read of an open file. Besides the round
// trip it reports the server's own CPU time per request (server-ns/op), which a loaded
// machine disturbs less.
func BenchmarkRequest(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	root, pid := startShare(b, Config{Dir: dir, Log: os.Stderr}, 64<<10)
	_, f, err := root.Walk([]string{"f"})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	for _, c := range []struct {
		name string
		req  func() error
	}{
		{"getattr", func() error { _, _, _, err := root.GetAttr(p9.AttrMaskAll); return err }},
		{"read4k", func() error { _, err := f.ReadAt(buf, 0); return err }},
	} {
		b.Run(c.name, func(b *testing.B) {
			before := cpuTime(b, pid)
			n := 0
			for b.Loop() {
				if err := c.req(); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(cpuTime(b, pid)-before)/float64(n), "server-ns/op")
		})
	}
}

// cpuTime is the user and system time pid has used, in nanoseconds.
func cpuTime(b *testing.B, pid int) int64 {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (which may hold spaces) start at state.
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return (ut + stime) * 1e7 // clock ticks of 10 ms
}

// includeStream is a changes stream as a guest's layer after a `tar x` of the first
// 2,000 files under 64 KiB of /usr/include sends it (bench/share's keep group): each
// directory before what it holds, under k/.
func includeStream(b *testing.B) []byte {
	b.Helper()
	// find's order and size test, as bench/share/run.sh picks them.
	out, err := exec.Command("find", "/usr/include", "-type", "f", "-size", "-64k").Output()
	files := strings.Fields(string(out))
	if err != nil || len(files) < 2000 {
		b.Skipf("/usr/include holds %d files under 64 KiB (%v), want 2000", len(files), err)
	}
	files = files[:2000]
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	made := map[string]bool{}
	sort.Strings(files) // a directory before what it holds, as writeChanges walks
	var mkdirs func(rel string)
	mkdirs = func(rel string) {
		if rel == "." || made[rel] {
			return
		}
		mkdirs(path.Dir(rel))
		made[rel] = true
		_ = tw.WriteHeader(&tar.Header{Name: rel, Typeflag: tar.TypeDir, Mode: 0o755})
	}
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			b.Fatal(err)
		}
		rel := "k" + strings.TrimPrefix(p, "/usr/include")
		mkdirs(path.Dir(rel))
		hdr := &tar.Header{Name: rel, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(data)), ModTime: time.Unix(1_700_000_000, 0)}
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(data); err != nil {
			b.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	b.Logf("stream: %d files, %d directories, %d bytes", len(files), len(made), buf.Len())
	return buf.Bytes()
}

// BenchmarkApply is the cost of applying includeStream to an empty share: "inproc" in
// this process (what a CPU profile and strace see), "server" through Apply's confined
// share server, as a guest's sync back. Each applies into a directory of its own, all
// removed at the end: a removal between them would put its filesystem's deferred work
// into the next one.
func BenchmarkApply(b *testing.B) {
	s := includeStream(b)
	b.Run("inproc", func(b *testing.B) {
		// The CPU time (user and system) the apply costs this process, which waiting on
		// a loaded machine's disk does not count.
		var cpu time.Duration
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			root, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
			if err != nil {
				b.Fatal(err)
			}
			fs := &fsys{root: root, hidden: map[string]bool{}}
			b.StartTimer()
			before := selfCPU(b)
			res, err := fs.apply(bytes.NewReader(s))
			cpu += selfCPU(b) - before
			b.StopTimer()
			unix.Close(root)
			if err != nil || res.nRefused+res.nFailed > 0 {
				b.Fatalf("%v %v", res, err)
			}
			b.StartTimer()
		}
		b.SetBytes(int64(len(s)))
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("server", func(b *testing.B) {
		var cpu time.Duration
		for range b.N {
			b.StopTimer()
			dir := b.TempDir()
			if os.Geteuid() == 0 { // served as its owner, as shareOwner's
				_ = os.Chmod(filepath.Dir(dir), 0o755)
				_ = os.Chown(dir, 1000, 1000)
			}
			b.StartTimer()
			before := childCPU(b)
			if ans := applyStream(b, dir, 0, s); !strings.HasPrefix(ans, "ok ") {
				b.Fatal(ans)
			}
			cpu += childCPU(b) - before // the server, exited and waited for
		}
		b.SetBytes(int64(len(s)))
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "server-cpu-ns/op")
	})
}

// selfCPU is the user and system time this process has used; childCPU that of its
// children it has waited for.
func selfCPU(b *testing.B) time.Duration  { return rusage(b, unix.RUSAGE_SELF) }
func childCPU(b *testing.B) time.Duration { return rusage(b, unix.RUSAGE_CHILDREN) }

func rusage(b *testing.B, who int) time.Duration {
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
