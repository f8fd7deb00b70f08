package home

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"unicode/utf8"
)

// Stat is what the index compares to tell an unchanged file without reading
// it. The ctime is in it because a guest can set a file's mtime back but
// not its ctime.
type Stat struct {
	Size  int64  `json:"size"`
	Mtime int64  `json:"mtime"`
	Ctime int64  `json:"ctime"`
	Ino   uint64 `json:"ino"`
	Mode  uint32 `json:"mode"`
}

// Indexed is a regular file's last seen stat and its chunks.
type Indexed struct {
	Stat   Stat     `json:"stat"`
	Chunks []string `json:"chunks"`
}

// Index maps a home's paths to what Scan last found there.
type Index map[string]Indexed

// ScanStats is what a Scan read.
type ScanStats struct {
	Hashed  int64 // bytes read and hashed: files the index did not vouch for
	Skipped []string
}

// Scan walks dir into a manifest. A regular file whose stat matches idx
// keeps its indexed chunks unread; every other file is read, and each chunk
// it holds is handed to put (nil: only hashed). Symlinks are recorded,
// never followed; sockets, pipes and devices are skipped. Permissions keep
// the 0777 bits alone. It returns the index of what it saw.
func Scan(dir string, idx Index, lim Limits, put func(hash string, data []byte) error) (Manifest, Index, ScanStats, error) {
	var m Manifest
	var st ScanStats
	out := Index{}
	var size int64
	buf := make([]byte, ChunkSize)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if !utf8.ValidString(rel) {
			return fmt.Errorf("%q: a home's file names must be UTF-8; rename it", rel)
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		e := Entry{Path: rel, Mode: uint32(fi.Mode().Perm())}
		switch {
		case fi.IsDir():
			e.Mode |= uint32(fs.ModeDir)
		case fi.Mode()&fs.ModeSymlink != 0:
			e.Mode = uint32(fs.ModeSymlink) | 0o777
			if e.Link, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			s := statOf(fi)
			e.Size = fi.Size()
			if size += e.Size; lim.MaxBytes > 0 && size > lim.MaxBytes {
				return fmt.Errorf("more than %d bytes (fleet.home.max_bytes) at %s: %w", lim.MaxBytes, rel, ErrTooLarge)
			}
			if old, ok := idx[rel]; ok && old.Stat == s {
				e.Chunks = old.Chunks
			} else {
				n, chunks, err := chunkFile(p, buf, put)
				if err != nil {
					return err
				}
				st.Hashed += n
				e.Chunks, e.Size = chunks, n
			}
			out[rel] = Indexed{Stat: s, Chunks: e.Chunks}
		default:
			st.Skipped = append(st.Skipped, rel)
			return nil
		}
		if lim.MaxFiles > 0 && len(m.Entries) >= lim.MaxFiles {
			return fmt.Errorf("more than %d files (fleet.home.max_files) at %s: %w", lim.MaxFiles, rel, ErrTooLarge)
		}
		m.Entries = append(m.Entries, e)
		return nil
	})
	if err != nil {
		return Manifest{}, nil, st, fmt.Errorf("scan %s: %w", dir, err)
	}
	// WalkDir's lexical order within a directory is not the order of the
	// joined paths ("a/b" walks before "a-b", yet sorts after it).
	slices.SortFunc(m.Entries, func(a, b Entry) int {
		switch {
		case a.Path < b.Path:
			return -1
		case a.Path > b.Path:
			return 1
		}
		return 0
	})
	return m, out, st, nil
}

// chunkFile reads a regular file without following a symlink put in its
// place, hashing each ChunkSize piece.
func chunkFile(p string, buf []byte, put func(string, []byte) error) (int64, []string, error) {
	f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
	if err != nil {
		return 0, nil, err
	}
	defer f.Close()
	var n int64
	var chunks []string
	for {
		k, err := io.ReadFull(f, buf)
		if k > 0 {
			h := Sum(buf[:k])
			if put != nil {
				if err := put(h, buf[:k]); err != nil {
					return 0, nil, err
				}
			}
			chunks = append(chunks, h)
			n += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return n, chunks, nil
		}
		if err != nil {
			return 0, nil, err
		}
	}
}

func statOf(fi fs.FileInfo) Stat {
	s := Stat{Size: fi.Size(), Mtime: fi.ModTime().UnixNano(), Mode: uint32(fi.Mode())}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		s.Ctime = sys.Ctim.Nano()
		s.Ino = sys.Ino
	}
	return s
}
