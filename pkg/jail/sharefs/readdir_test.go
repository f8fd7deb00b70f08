package sharefs

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hugelgupf/p9/p9"
	"golang.org/x/sys/unix"
)

// listAll reads directory d to its end, count bytes at a time, as the guest's kernel does.
func listAll(t *testing.T, d p9.File, count uint32) []string {
	t.Helper()
	var names []string
	var off uint64
	for {
		ents, err := d.Readdir(off, count)
		if err != nil {
			t.Fatalf("readdir at %d: %v", off, err)
		}
		if len(ents) == 0 {
			return names
		}
		for _, e := range ents {
			names = append(names, e.Name)
			off = e.Offset
		}
	}
}

// TestReaddirBounded is a guest that opens one big directory on many fids and reads each
// once: the share server lists from the directory itself, a message at a time, so its
// memory does not grow with the directory times the fids; and a listing read in small
// pieces still returns every entry once.
func TestReaddirBounded(t *testing.T) {
	dir := t.TempDir()
	const entries = 5000
	long := strings.Repeat("n", 200)
	for i := range entries {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s%05d", long, i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	root, pid := startShare(t, Config{Dir: dir, ReadOnly: true, Log: os.Stderr}, 256<<10)

	one := walk(t, root)
	if _, _, err := one.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	names := listAll(t, one, 4096)
	seen := map[string]bool{}
	for _, n := range names {
		if seen[n] || !strings.HasPrefix(n, long) {
			t.Fatalf("listing has %q twice or an entry that is not in the directory", n)
		}
		seen[n] = true
	}
	if len(seen) != entries {
		t.Fatalf("listing read 4 KiB at a time has %d entries, want %d", len(seen), entries)
	}

	rss0 := rssKiB(t, pid)
	const fids = 300
	held := make([]p9.File, 0, fids) // kept: the client clunks what it drops
	for range fids {
		d := walk(t, root)
		if _, _, err := d.Open(p9.ReadOnly); err != nil {
			t.Fatal(err)
		}
		if _, err := d.Readdir(0, 64<<10); err != nil {
			t.Fatal(err)
		}
		held = append(held, d)
	}
	grew := rssKiB(t, pid) - rss0
	t.Logf("share server grew by %d KiB for %d open listings of %d entries", grew, len(held), entries)
	if limit := memScale * 32 << 10; grew > limit {
		t.Errorf("share server grew by %d KiB for %d open listings, want under %d KiB", grew, len(held), limit)
	}
}

// TestReaddirTypes: each entry carries the kernel's d_type, which Linux's client hands
// to ls and find as it is.
func TestReaddirTypes(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "f"), nil, 0o644)
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Symlink("f", filepath.Join(dir, "l"))
	root := serveDir(t, dir, 0)
	d := walk(t, root)
	if _, _, err := d.Open(p9.ReadOnly); err != nil {
		t.Fatal(err)
	}
	ents, err := d.Readdir(0, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]p9.QIDType{"f": unix.DT_REG, "d": unix.DT_DIR, "l": unix.DT_LNK}
	for _, e := range ents {
		if e.Type != want[e.Name] {
			t.Errorf("%s: type %d, want %d", e.Name, e.Type, want[e.Name])
		}
		delete(want, e.Name)
	}
	if len(want) != 0 {
		t.Errorf("missing from the listing: %v", want)
	}
}
