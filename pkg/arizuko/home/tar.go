package home

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// TarDir writes dir as a tar stream: directories, regular files and
// symlinks (never followed), as Scan sees them; other files are skipped.
func TarDir(w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(fi.Mode().Perm()), ModTime: fi.ModTime()}
		switch {
		case fi.IsDir():
			h.Typeflag = tar.TypeDir
		case fi.Mode()&fs.ModeSymlink != 0:
			h.Typeflag = tar.TypeSymlink
			if h.Linkname, err = os.Readlink(p); err != nil {
				return err
			}
		case fi.Mode().IsRegular():
			h.Typeflag, h.Size = tar.TypeReg, fi.Size()
		default:
			return nil
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if h.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.OpenFile(p, os.O_RDONLY|noFollow, 0)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.CopyN(tw, f, h.Size)
		return err
	})
	if err != nil {
		return fmt.Errorf("tar %s: %w", dir, err)
	}
	return tw.Close()
}

// FromTar reads a tar stream into a manifest, handing each chunk to put.
// Paths must be relative and stay inside the home; directories a path
// needs are added; hard links, devices and the like are refused.
func FromTar(r io.Reader, lim Limits, put func(hash string, data []byte) error) (Manifest, error) {
	tr := tar.NewReader(r)
	byPath := map[string]Entry{}
	var size int64
	buf := make([]byte, ChunkSize)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return Manifest{}, fmt.Errorf("tar: %w", err)
		}
		name := strings.TrimPrefix(path.Clean(strings.TrimPrefix(h.Name, "./")), "./")
		if name == "." {
			continue
		}
		if err := validPath(name); err != nil {
			return Manifest{}, fmt.Errorf("tar entry %q: %w", h.Name, err)
		}
		e := Entry{Path: name, Mode: uint32(h.Mode) & 0o777}
		switch h.Typeflag {
		case tar.TypeDir:
			e.Mode |= uint32(fs.ModeDir)
		case tar.TypeSymlink:
			e.Mode, e.Link = uint32(fs.ModeSymlink)|0o777, h.Linkname
		case tar.TypeReg:
			if size += h.Size; lim.MaxBytes > 0 && size > lim.MaxBytes {
				return Manifest{}, fmt.Errorf("more than %d bytes (fleet.home.max_bytes) at %s: %w", lim.MaxBytes, name, ErrTooLarge)
			}
			for {
				k, err := io.ReadFull(tr, buf)
				if k > 0 {
					c := Sum(buf[:k])
					if err := put(c, buf[:k]); err != nil {
						return Manifest{}, err
					}
					e.Chunks = append(e.Chunks, c)
					e.Size += int64(k)
				}
				if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
					break
				}
				if err != nil {
					return Manifest{}, fmt.Errorf("tar entry %s: %w", name, err)
				}
			}
		default:
			return Manifest{}, fmt.Errorf("tar entry %s: type %q: a home holds files, directories and symlinks only", name, h.Typeflag)
		}
		byPath[name] = e
		for d := path.Dir(name); d != "."; d = path.Dir(d) {
			if _, ok := byPath[d]; !ok {
				byPath[d] = Entry{Path: d, Mode: uint32(fs.ModeDir) | 0o755}
			}
		}
		if lim.MaxFiles > 0 && len(byPath) > lim.MaxFiles {
			return Manifest{}, fmt.Errorf("more than %d files (fleet.home.max_files) at %s: %w", lim.MaxFiles, name, ErrTooLarge)
		}
	}
	var m Manifest
	for _, e := range byPath {
		m.Entries = append(m.Entries, e)
	}
	slices.SortFunc(m.Entries, func(a, b Entry) int { return strings.Compare(a.Path, b.Path) })
	return m, m.Validate()
}

// WriteTar writes the home m describes as a tar stream.
func WriteTar(w io.Writer, m Manifest, get func(hash string) ([]byte, error)) error {
	tw := tar.NewWriter(w)
	for _, e := range m.Entries {
		h := &tar.Header{Name: e.Path, Mode: int64(e.Mode & 0o777)}
		mode := e.FileMode()
		switch {
		case mode.IsDir():
			h.Typeflag = tar.TypeDir
		case mode&fs.ModeSymlink != 0:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Link
		default:
			h.Typeflag, h.Size = tar.TypeReg, e.Size
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		for _, c := range e.Chunks {
			b, err := get(c)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
