package sharefs

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/hugelgupf/p9/p9"
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
