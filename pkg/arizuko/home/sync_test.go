package home

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// chunkMap is a store in memory: what Scan puts, Sync gets.
type chunkMap map[string][]byte

func (c chunkMap) put(h string, b []byte) error { c[h] = append([]byte(nil), b...); return nil }

func (c chunkMap) get(h string) ([]byte, error) {
	b, ok := c[h]
	if !ok {
		return nil, errors.New("no chunk " + h)
	}
	return b, nil
}

func write(t *testing.T, root, p string, data []byte, mode os.FileMode) {
	t.Helper()
	full := filepath.Join(root, p)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(full, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(full, mode); err != nil {
		t.Fatal(err)
	}
}

// sample makes a home with a multi-chunk file, an empty file, an executable,
// a setuid file, a nested directory, a symlink out of the home and a FIFO.
func sample(t *testing.T) string {
	t.Helper()
	d := t.TempDir()
	write(t, d, "agent.py", []byte("print('hi')\n"), 0o644)
	write(t, d, "big.bin", bytes.Repeat([]byte("0123456789abcdef"), ChunkSize/16*2+7), 0o600)
	write(t, d, "empty", nil, 0o644)
	write(t, d, "bin/run", []byte("#!/bin/sh\n"), 0o755)
	write(t, d, "suid", []byte("x"), 0o4755)
	write(t, d, "a/b/c/deep.txt", []byte("deep"), 0o640)
	if err := os.Symlink("/etc/passwd", filepath.Join(d, "passwd")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(d, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	return d
}

func TestScanSyncRoundTrip(t *testing.T) {
	src := sample(t)
	store := chunkMap{}
	m, _, st, err := Scan(src, nil, Limits{}, store.put)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Skipped) != 1 || st.Skipped[0] != "fifo" {
		t.Errorf("skipped %v, want the fifo", st.Skipped)
	}
	var big Entry
	for _, e := range m.Entries {
		if e.Path == "big.bin" {
			big = e
		}
		if e.Path == "suid" && e.Mode != 0o755 {
			t.Errorf("suid kept mode %o: only the 0777 bits travel", e.Mode)
		}
	}
	if len(big.Chunks) != 3 {
		t.Errorf("big.bin in %d chunks, want 3", len(big.Chunks))
	}
	dst := t.TempDir()
	_, sst, err := Sync(dst, nil, m, store.get)
	if err != nil {
		t.Fatal(err)
	}
	if sst.Written != 6 || sst.Removed != 0 {
		t.Errorf("sync wrote %d, removed %d; want 6 and 0", sst.Written, sst.Removed)
	}
	m2, _, _, err := Scan(dst, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if m2.Hash() != m.Hash() {
		t.Errorf("synced home differs: %v", Diff(m, m2))
	}
	if l, err := os.Readlink(filepath.Join(dst, "passwd")); err != nil || l != "/etc/passwd" {
		t.Errorf("symlink = %q %v", l, err)
	}
}

// Sync brings a changed home back: extra files go, changed ones are
// rewritten, a symlink planted where a directory belongs is removed, not
// followed, and nothing outside the home is touched.
func TestSyncUndoesChanges(t *testing.T) {
	src := sample(t)
	store := chunkMap{}
	m, _, _, err := Scan(src, nil, Limits{}, store.put)
	if err != nil {
		t.Fatal(err)
	}
	outside := t.TempDir()
	for _, c := range []struct {
		name   string
		change func(t *testing.T, d string)
	}{
		{"extra file", func(t *testing.T, d string) { write(t, d, "a/new.txt", []byte("new"), 0o644) }},
		{"changed file", func(t *testing.T, d string) { write(t, d, "agent.py", []byte("evil()\n"), 0o644) }},
		{"removed file", func(t *testing.T, d string) { os.Remove(filepath.Join(d, "bin/run")) }},
		{"mode", func(t *testing.T, d string) { os.Chmod(filepath.Join(d, "a"), 0o700) }},
		{"dir replaced by symlink out", func(t *testing.T, d string) {
			os.RemoveAll(filepath.Join(d, "a"))
			if err := os.Symlink(outside, filepath.Join(d, "a")); err != nil {
				t.Fatal(err)
			}
		}},
		{"file replaced by symlink out", func(t *testing.T, d string) {
			os.Remove(filepath.Join(d, "agent.py"))
			if err := os.Symlink(filepath.Join(outside, "agent.py"), filepath.Join(d, "agent.py")); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dst := t.TempDir()
			idx, _, err := Sync(dst, nil, m, store.get)
			if err != nil {
				t.Fatal(err)
			}
			c.change(t, dst)
			if _, _, err := Sync(dst, idx, m, store.get); err != nil {
				t.Fatal(err)
			}
			got, _, _, err := Scan(dst, nil, Limits{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if d := Diff(m, got); len(d) > 0 {
				t.Errorf("after sync the home differs: %v", d)
			}
			if es, _ := os.ReadDir(outside); len(es) > 0 {
				t.Errorf("sync wrote outside the home: %v", es)
			}
		})
	}
}

// A rescan with the index reads only what changed.
func TestScanIndexReadsOnlyChanges(t *testing.T) {
	d := sample(t)
	m, idx, st, err := Scan(d, nil, Limits{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Hashed != m.Size() {
		t.Errorf("first scan hashed %d bytes, want all %d", st.Hashed, m.Size())
	}
	m2, idx, st, err := Scan(d, idx, Limits{}, nil)
	if err != nil || st.Hashed != 0 || m2.Hash() != m.Hash() {
		t.Errorf("unchanged rescan hashed %d bytes (err %v), want 0 and the same manifest", st.Hashed, err)
	}
	write(t, d, "agent.py", []byte("print('bye')\n"), 0o644)
	m3, _, st, err := Scan(d, idx, Limits{}, nil)
	if err != nil || st.Hashed != int64(len("print('bye')\n")) {
		t.Errorf("one-file change hashed %d bytes (err %v), want that file alone", st.Hashed, err)
	}
	if ch := Diff(m, m3); len(ch) != 1 || ch[0].Path != "agent.py" {
		t.Errorf("diff %v, want agent.py changed", ch)
	}
}

func TestScanLimits(t *testing.T) {
	d := sample(t)
	for _, c := range []struct {
		lim  Limits
		want string
	}{
		{Limits{MaxBytes: 1000}, "fleet.home.max_bytes"},
		{Limits{MaxFiles: 3}, "fleet.home.max_files"},
	} {
		_, _, _, err := Scan(d, nil, c.lim, nil)
		if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err = %v, want ErrTooLarge naming %s", c.lim, err, c.want)
		}
	}
}

// A chunk whose bytes do not match its name is refused, not written.
func TestSyncRefusesForgedChunk(t *testing.T) {
	src := sample(t)
	store := chunkMap{}
	m, _, _, err := Scan(src, nil, Limits{}, store.put)
	if err != nil {
		t.Fatal(err)
	}
	for h := range store {
		store[h] = []byte("forged")
	}
	if _, _, err := Sync(t.TempDir(), nil, m, store.get); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Errorf("forged chunks: err = %v", err)
	}
}
