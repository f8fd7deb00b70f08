package sharefs

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/hugelgupf/p9/p9"
)

// BenchmarkRequest is the cost of one 9p request through a real, confined share
// server: a stat of the root, and a 4 KiB read of an open file.
func BenchmarkRequest(b *testing.B) {
	dir := b.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), make([]byte, 4096), 0o644); err != nil {
		b.Fatal(err)
	}
	root, _ := startShare(b, Config{Dir: dir, Log: os.Stderr}, 64<<10)
	b.Run("getattr", func(b *testing.B) {
		for b.Loop() {
			if _, _, _, err := root.GetAttr(p9.AttrMaskAll); err != nil {
				b.Fatal(err)
			}
		}
	})
	_, f, err := root.Walk([]string{"f"})
	if err != nil {
		b.Fatal(err)
	}
	if _, _, err := f.Open(p9.ReadOnly); err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 4096)
	b.Run("read4k", func(b *testing.B) {
		for b.Loop() {
			if _, err := f.ReadAt(buf, 0); err != nil {
				b.Fatal(err)
			}
		}
	})
}
