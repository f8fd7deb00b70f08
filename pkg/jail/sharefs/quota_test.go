package sharefs

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// TestQuotaEntries is a guest that spends the host's inodes instead of its bytes: empty
// files, directories, symlinks and hard links each count entryCost, so a share with room
// for 8 entries takes 8 and refuses the ninth with ENOSPC; renaming onto another link of
// the same file frees nothing; removing an entry frees its room.
func TestQuotaEntries(t *testing.T) {
	dir, _ := shareOwner(t)
	root := serveDir(t, dir, 8*entryCost)
	f, _, _, err := walk(t, root).Create("f0", p9.WriteOnly, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	made := []func() error{
		func() error { _, err := root.Mkdir("d", 0o755, 0, 0); return err },
		func() error { _, err := root.Symlink("f0", "s", 0, 0); return err },
		func() error { return root.Link(f, "l1") },
	}
	for i := range 4 {
		made = append(made, func() error {
			_, _, _, err := walk(t, root).Create("e"+string(rune('0'+i)), p9.WriteOnly, 0o644, 0, 0)
			return err
		})
	}
	for i, mk := range made {
		if err := mk(); err != nil {
			t.Fatalf("entry %d of 8: %v", i+2, err)
		}
	}
	// The share is full: a file, a directory, a symlink and a hard link are all refused.
	refused := map[string]error{
		"create":  func() error { _, _, _, err := walk(t, root).Create("x", p9.WriteOnly, 0o644, 0, 0); return err }(),
		"mkdir":   func() error { _, err := root.Mkdir("x", 0o755, 0, 0); return err }(),
		"symlink": func() error { _, err := root.Symlink("f0", "x", 0, 0); return err }(),
		"link":    root.Link(f, "x"),
	}
	for op, err := range refused {
		if linux.ExtractErrno(err) != linux.ENOSPC {
			t.Errorf("%s in a full share: %v, want ENOSPC", op, err)
		}
	}
	if _, err := os.Lstat(dir + "/x"); !os.IsNotExist(err) {
		t.Errorf("a refused entry is on the host (lstat x: %v)", err)
	}
	// l1 and f0 are one file: renaming one onto the other leaves both entries.
	if err := walk(t, root).RenameAt("l1", walk(t, root), "f0"); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := walk(t, root).Create("x", p9.WriteOnly, 0o644, 0, 0); linux.ExtractErrno(err) != linux.ENOSPC {
		t.Errorf("create after renaming a link onto its twin: %v, want ENOSPC", err)
	}
	// Removing an entry, or replacing one by a rename, frees its room.
	if err := walk(t, root).UnlinkAt("e0", 0); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := walk(t, root).Create("x", p9.WriteOnly, 0o644, 0, 0); err != nil {
		t.Errorf("create after a remove: %v", err)
	}
	if err := walk(t, root).RenameAt("e1", walk(t, root), "e2"); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Mkdir("y", 0o755, 0, 0); err != nil {
		t.Errorf("mkdir after a rename replaced an entry: %v", err)
	}
}

// TestQuotaTruncFailedOpen: an open with O_TRUNC that fails (here O_DIRECTORY on a file)
// truncates nothing, so it gives no quota back, however often the guest repeats it.
func TestQuotaTruncFailedOpen(t *testing.T) {
	dir, _ := shareOwner(t)
	root := serveDir(t, dir, 1<<20+entryCost)
	f, _, _, err := walk(t, root).Create("big", p9.WriteOnly, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, _, err := walk(t, root, "big").Open(p9.ReadOnly | p9.OpenFlags(unix.O_TRUNC|unix.O_DIRECTORY)); err == nil {
			t.Fatal("O_DIRECTORY open of a file succeeded")
		}
	}
	if _, err := f.WriteAt(make([]byte, 64<<10), 1<<20); linux.ExtractErrno(err) != linux.ENOSPC {
		t.Fatalf("write past a full quota after failed O_TRUNC opens: %v, want ENOSPC", err)
	}
	// A truncating open that works gives the file's bytes back.
	if _, _, err := walk(t, root, "big").Open(p9.WriteOnly | p9.OpenFlags(unix.O_TRUNC)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 1<<20), 0); err != nil {
		t.Fatalf("write after a truncating open: %v", err)
	}
}

// TestQuotaRemovedWhileOpen is a guest that keeps a file open, removes it, and writes
// elsewhere: the removed file's data stays on the host until its last close, so its
// room comes back only then. A rename over the open file is the same removal.
func TestQuotaRemovedWhileOpen(t *testing.T) {
	dir, _ := shareOwner(t)
	root := serveDir(t, dir, 1<<20+3*entryCost)
	create := func(name string) p9.File {
		t.Helper()
		f, _, _, err := walk(t, root).Create(name, p9.ReadWrite, 0o644, 0, 0)
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		return f
	}
	removals := []struct {
		name   string
		remove func() error
	}{
		{"unlink", func() error { return walk(t, root).UnlinkAt("held", 0) }},
		{"rename over", func() error {
			create("other").Close()
			return walk(t, root).RenameAt("other", walk(t, root), "held")
		}},
	}
	chunk := make([]byte, 64<<10)
	for _, r := range removals {
		held := create("held")
		if _, err := held.WriteAt(make([]byte, 1<<20), 0); err != nil {
			t.Fatal(err)
		}
		if err := r.remove(); err != nil {
			t.Fatalf("%s: %v", r.name, err)
		}
		next := create("next")
		if _, err := next.WriteAt(chunk, 0); linux.ExtractErrno(err) != linux.ENOSPC {
			t.Errorf("%s of an open 1 MiB file, then a write: %v, want ENOSPC while it is open", r.name, err)
		}
		// The data is still the host's to hold, through the open fid.
		if _, err := held.WriteAt([]byte("x"), 0); err != nil {
			t.Errorf("%s: write to the open fid: %v", r.name, err)
		}
		if err := held.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := next.WriteAt(chunk, 0); err != nil {
			t.Errorf("%s, then the last close: write: %v", r.name, err)
		}
		next.Close()
		for _, name := range []string{"next", "held"} {
			if err := walk(t, root).UnlinkAt(name, 0); err != nil && !os.IsNotExist(err) && linux.ExtractErrno(err) != linux.ENOENT {
				t.Fatalf("unlink %s: %v", name, err)
			}
		}
	}
}
