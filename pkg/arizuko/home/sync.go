package home

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// SyncStats is what a Sync changed.
type SyncStats struct {
	Written, Removed int
	Bytes            int64 // bytes of files written
}

// Sync makes dir hold exactly want: paths it lacks are written with the
// chunks get returns, paths want lacks are removed, the rest stays untouched.
// Every change goes through an os.Root on dir, so a symlink the guest left
// in the home never leads a write outside it. It returns the index of the
// synced home.
func Sync(dir string, idx Index, want Manifest, get func(hash string) ([]byte, error)) (Index, SyncStats, error) {
	var st SyncStats
	if err := want.Validate(); err != nil {
		return nil, st, err
	}
	cur, curIdx, _, err := Scan(dir, idx, Limits{}, nil)
	if err != nil {
		return nil, st, err
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, st, err
	}
	defer root.Close()
	byPath := map[string]Entry{}
	for _, e := range want.Entries {
		byPath[e.Path] = e
	}
	had := map[string]Entry{}
	for _, e := range cur.Entries {
		had[e.Path] = e
	}
	changes := Diff(cur, want)
	// Remove the children before their parents, and anything that changes
	// but a directory keeping its type (a chmod will do there).
	for _, c := range slices.Backward(changes) {
		if c.Op == "added" {
			continue
		}
		old, nu := had[c.Path], byPath[c.Path]
		if c.Op == "changed" && old.FileMode().IsDir() && nu.FileMode().IsDir() {
			continue
		}
		if err := root.RemoveAll(filepath.FromSlash(c.Path)); err != nil {
			return nil, st, fmt.Errorf("sync %s: %w", c.Path, err)
		}
		delete(curIdx, c.Path)
		st.Removed++
	}
	for _, c := range changes {
		e, ok := byPath[c.Path]
		if !ok {
			continue
		}
		p := filepath.FromSlash(e.Path)
		mode := e.FileMode()
		switch {
		case mode.IsDir():
			if err := root.Mkdir(p, mode.Perm()); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, st, fmt.Errorf("sync %s: %w", e.Path, err)
			}
			if err := root.Chmod(p, mode.Perm()); err != nil {
				return nil, st, fmt.Errorf("sync %s: %w", e.Path, err)
			}
		case mode&fs.ModeSymlink != 0:
			if err := root.Symlink(e.Link, p); err != nil {
				return nil, st, fmt.Errorf("sync %s: %w", e.Path, err)
			}
		default:
			ix, err := writeFile(root, p, e, get)
			if err != nil {
				return nil, st, fmt.Errorf("sync %s: %w", e.Path, err)
			}
			curIdx[e.Path] = ix
			st.Written++
			st.Bytes += e.Size
		}
	}
	return curIdx, st, nil
}

// writeFile creates a file that must not exist yet (Sync removed what was
// there), so a symlink raced into its place is refused, not followed.
func writeFile(root *os.Root, p string, e Entry, get func(string) ([]byte, error)) (Indexed, error) {
	f, err := root.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, e.FileMode().Perm())
	if err != nil {
		return Indexed{}, err
	}
	var n int64
	for _, h := range e.Chunks {
		b, err := get(h)
		if err == nil && Sum(b) != h {
			err = fmt.Errorf("chunk %s: content does not match its name", h)
		}
		if err != nil {
			f.Close()
			return Indexed{}, err
		}
		if _, err := f.Write(b); err != nil {
			f.Close()
			return Indexed{}, err
		}
		n += int64(len(b))
	}
	if n != e.Size {
		f.Close()
		return Indexed{}, fmt.Errorf("%w: %d bytes from chunks, manifest says %d", ErrBadManifest, n, e.Size)
	}
	// The umask may have cut bits the manifest keeps.
	if err := f.Chmod(e.FileMode().Perm()); err != nil {
		f.Close()
		return Indexed{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return Indexed{}, err
	}
	if err := f.Close(); err != nil {
		return Indexed{}, err
	}
	// Closing may not change the stat, but ctime moves on chmod; read it anew.
	if fi2, err := root.Lstat(p); err == nil {
		fi = fi2
	}
	return Indexed{Stat: statOf(fi), Chunks: e.Chunks}, nil
}
