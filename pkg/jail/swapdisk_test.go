package jail

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// TestSwapSize: the swap is the quota of each share synced at exit, swapMax when the
// quota is unbounded, and none without such a share.
func TestSwapSize(t *testing.T) {
	exit := func(limit int64) control.Mount {
		return control.Mount{Tag: "v0", Sync: control.SyncExit, SyncLimit: limit}
	}
	cases := []struct {
		name   string
		mounts []control.Mount
		want   int64
	}{
		{"no shares", nil, 0},
		{"live share", []control.Mount{{Tag: "v0"}}, 0},
		{"read-only", []control.Mount{{Tag: "v0", Sync: control.SyncExit, SyncLimit: 1 << 30, ReadOnly: true}}, 0},
		{"quota", []control.Mount{exit(1 << 30), {Tag: "v1"}}, 1 << 30},
		{"unbounded", []control.Mount{exit(0)}, swapMax},
		{"past the max", []control.Mount{exit(swapMax + 1)}, swapMax},
	}
	for _, c := range cases {
		if got := swapSize(control.RunSpec{Mounts: c.mounts}); got != c.want {
			t.Errorf("%s: swap %d, want %d", c.name, got, c.want)
		}
	}
}

// TestOpenSwapDisk: the disk is sparse at its full size, owner-only, formatted as swap
// (the page mkswap writes), and has no name in its directory, so nothing of it outlives
// its last descriptor.
func TestOpenSwapDisk(t *testing.T) {
	dir := t.TempDir()
	f, err := openSwapDisk(dir, 1<<30, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 1<<30 || st.Mode().Perm() != 0o600 {
		t.Errorf("size %d mode %v, want 1 GiB and 0600", st.Size(), st.Mode())
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Blocks*512 > swapPage || sys.Nlink != 0 {
		t.Errorf("blocks %d links %d, want a sparse file without a name", sys.Blocks, sys.Nlink)
	}
	h := make([]byte, swapPage)
	if _, err := f.ReadAt(h, 0); err != nil {
		t.Fatal(err)
	}
	version, last := binary.LittleEndian.Uint32(h[1024:]), binary.LittleEndian.Uint32(h[1028:])
	if string(h[swapPage-10:]) != "SWAPSPACE2" || version != 1 || last != 1<<30/swapPage-1 {
		t.Errorf("header: magic %q version %d last page %d, want SWAPSPACE2, 1, %d",
			h[swapPage-10:], version, last, 1<<30/swapPage-1)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("the directory holds %v", ents)
	}
	if _, err := f.WriteAt([]byte("x"), 1<<20); err != nil {
		t.Fatal(err)
	}
	// A run without swap gets an empty disk: nothing the guest could write to.
	e, err := openSwapDisk(dir, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := e.Stat(); err != nil || st.Size() != 0 {
		t.Errorf("a disk of no swap: %v, %v", st.Size(), err)
	}
	e.Close()
	// A cache dir it cannot write in: the temp dir instead.
	g, err := openSwapDisk(filepath.Join(dir, "missing"), 1<<20, nil)
	if err != nil {
		t.Fatalf("without a usable cache dir: %v", err)
	}
	g.Close()
}
