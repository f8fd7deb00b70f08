package initramfs

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/cavaliergopher/cpio"
)

var fakeInit = append([]byte("\x7fELF"), bytes.Repeat([]byte("guest-init"), 1001)...)

func TestWriteParsesBack(t *testing.T) {
	var buf bytes.Buffer
	if err := Write(&buf, fakeInit); err != nil {
		t.Fatal(err)
	}
	want := map[string]cpio.FileMode{
		"dev":         cpio.TypeDir | 0o755,
		"dev/console": cpio.TypeChar | 0o600,
		"proc":        cpio.TypeDir | 0o555,
		"sys":         cpio.TypeDir | 0o555,
		"run":         cpio.TypeDir | 0o755,
		"tmp":         cpio.TypeDir | 0o1777,
		"init":        cpio.TypeReg | 0o755,
	}
	r := cpio.NewReader(bytes.NewReader(buf.Bytes()))
	seen := map[string]bool{}
	for {
		h, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("parse: %v", err)
		}
		m, ok := want[h.Name]
		if !ok {
			t.Fatalf("unexpected entry %q", h.Name)
		}
		if h.Mode != m {
			t.Errorf("%s mode %o, want %o", h.Name, h.Mode, m)
		}
		if h.Uid != 0 || h.Guid != 0 {
			t.Errorf("%s owned by %d:%d, want root", h.Name, h.Uid, h.Guid)
		}
		data, err := io.ReadAll(r)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "init" && !bytes.Equal(data, fakeInit) {
			t.Errorf("init content differs: %d bytes, want %d", len(data), len(fakeInit))
		}
		seen[h.Name] = true
	}
	if len(seen) != len(want) {
		t.Fatalf("entries %v, want %v", seen, want)
	}
	// The cpio reader does not expose the device number; read it from the raw header.
	raw := buf.Bytes()
	i := bytes.Index(raw, []byte("dev/console\x00"))
	if i < 110 {
		t.Fatal("dev/console header not found")
	}
	hdr := string(raw[i-110 : i])
	maj, _ := strconv.ParseUint(hdr[78:86], 16, 32)
	min, _ := strconv.ParseUint(hdr[86:94], 16, 32)
	if maj != 5 || min != 1 {
		t.Fatalf("dev/console rdev %d,%d, want 5,1", maj, min)
	}
}

func TestEnsureCachesByContent(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "guest-init")
	if err := os.WriteFile(bin, fakeInit, 0o755); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(dir, "cache")
	p1, err := Ensure(bin, cache)
	if err != nil {
		t.Fatal(err)
	}
	st1, err := os.Stat(p1)
	if err != nil {
		t.Fatal(err)
	}
	p2, err := Ensure(bin, cache)
	if err != nil || p2 != p1 {
		t.Fatalf("second Ensure = %q, %v; want the cached %q", p2, err, p1)
	}
	if st2, _ := os.Stat(p2); !os.SameFile(st1, st2) {
		t.Fatal("second Ensure rebuilt the archive")
	}
	if err := os.WriteFile(bin, append(fakeInit, 'x'), 0o755); err != nil {
		t.Fatal(err)
	}
	p3, err := Ensure(bin, cache)
	if err != nil || p3 == p1 {
		t.Fatalf("changed guest-init gave %q, %v; want a new archive", p3, err)
	}
	ents, _ := os.ReadDir(cache)
	for _, e := range ents {
		if filepath.Ext(e.Name()) == ".tmp" {
			t.Fatalf("temporary file %s left behind", e.Name())
		}
	}
}

func TestEnsureRejectsBadInput(t *testing.T) {
	dir := t.TempDir()
	if _, err := Ensure(filepath.Join(dir, "missing"), dir); err == nil {
		t.Fatal("missing guest-init accepted")
	}
	notELF := filepath.Join(dir, "script")
	os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755)
	if _, err := Ensure(notELF, dir); err == nil {
		t.Fatal("non-ELF guest-init accepted")
	}
}
