package main

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// TestWriteChanges: an overlay upper layer becomes a changes stream: directories before
// what they hold, an opaque directory marked, a whiteout as a removal, a symlink as
// itself, a device sent as what it is (for the host to refuse).
func TestWriteChanges(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("whiteouts and trusted xattrs need root")
	}
	up := t.TempDir()
	os.MkdirAll(filepath.Join(up, "d/sub"), 0o755)
	os.WriteFile(filepath.Join(up, "d/sub/f"), []byte("data"), 0o640)
	os.Symlink("/etc", filepath.Join(up, "ln"))
	if err := unix.Mknod(filepath.Join(up, "gone"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(up, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Setxattr(filepath.Join(up, "d"), "trusted.overlay.opaque", []byte("y"), 0); err != nil {
		t.Skipf("trusted xattrs here: %v", err)
	}
	var b bytes.Buffer
	if err := writeChanges(&b, up); err != nil {
		t.Fatal(err)
	}
	type got struct {
		typ          byte
		opaque, gone bool
		link, data   string
	}
	var order []string
	seen := map[string]got{}
	tr := tar.NewReader(&b)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(tr)
		order = append(order, h.Name)
		seen[h.Name] = got{h.Typeflag, h.PAXRecords[control.SyncOpaque] != "", h.PAXRecords[control.SyncRemove] != "", h.Linkname, string(data)}
	}
	want := map[string]got{
		"d":       {typ: tar.TypeDir, opaque: true},
		"d/sub":   {typ: tar.TypeDir},
		"d/sub/f": {typ: tar.TypeReg, data: "data"},
		"ln":      {typ: tar.TypeSymlink, link: "/etc"},
		"gone":    {typ: tar.TypeReg, gone: true},
		"null":    {typ: tar.TypeChar},
	}
	for name, w := range want {
		if seen[name] != w {
			t.Errorf("%s: %+v, want %+v", name, seen[name], w)
		}
	}
	if len(seen) != len(want) {
		t.Errorf("entries %v", order)
	}
	pos := map[string]int{}
	for i, n := range order {
		pos[n] = i
	}
	if !(pos["d"] < pos["d/sub"] && pos["d/sub"] < pos["d/sub/f"]) {
		t.Errorf("a directory after what it holds: %v", order)
	}
}

// TestWriteFileSize: a file is sent at the size it had when the walk looked at it,
// cut there when it grew since, padded with zeros when it shrank.
func TestWriteFileSize(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		size int64
		want string
	}{{10, "0123456789"}, {4, "0123"}, {13, "0123456789\x00\x00\x00"}} {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		if err := writeFile(tw, &tar.Header{Name: "f", Mode: 0o644}, p, c.size, make([]byte, 3)); err != nil {
			t.Fatal(err)
		}
		if err := tw.Close(); err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(&b)
		h, err := tr.Next()
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil || h.Size != c.size || string(data) != c.want {
			t.Errorf("size %d: header %d, data %q, %v; want %q", c.size, h.Size, data, err, c.want)
		}
	}
}
