// Package home keeps a folder's home as content-addressed data: a manifest
// of entries (path, mode, size, the sha256 names of the file's chunks;
// symlinks as their target, never followed) over chunks written once. The
// fleet's control plane stores both in JetStream; each runner keeps a chunk
// cache and a stat index, so an unchanged home costs a manifest check and a
// one-file change ships the chunks of that file alone.
package home

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
)

// ChunkSize is the most bytes of a file one chunk holds: under NATS's
// default max_payload of 1 MiB, so a chunk is one JetStream message.
const ChunkSize = 512 << 10

// noFollow opens a file only if it is not a symlink.
const noFollow = syscall.O_NOFOLLOW

// Sentinel errors callers branch on.
var (
	// ErrTooLarge is a home past its folder's size or file limit.
	ErrTooLarge = errors.New("home is over its limit")
	// ErrBadManifest is a manifest that does not describe a home: a path
	// escaping it, a chunk name that is not a sha256, sizes that disagree.
	ErrBadManifest = errors.New("invalid home manifest")
)

// Entry is one path of a home. Mode holds the type bits of fs.FileMode
// (directory, symlink; none for a regular file) and the permission bits.
type Entry struct {
	Path   string   `json:"path"` // slash-separated, relative, clean
	Mode   uint32   `json:"mode"`
	Size   int64    `json:"size,omitempty"`
	Chunks []string `json:"chunks,omitempty"` // sha256 hex of each ChunkSize piece
	Link   string   `json:"link,omitempty"`   // a symlink's target
}

// FileMode is the entry's mode as fs.FileMode.
func (e Entry) FileMode() fs.FileMode { return fs.FileMode(e.Mode) }

// Manifest is a whole home, its entries sorted by path.
type Manifest struct {
	Entries []Entry `json:"entries"`
}

// Limits bound one folder's home; zero is no bound.
type Limits struct {
	MaxBytes int64 `json:"max_bytes,omitempty"`
	MaxFiles int   `json:"max_files,omitempty"`
}

// Check says which limit m is over, naming the setting that raises it.
func (l Limits) Check(m Manifest) error {
	if l.MaxBytes > 0 && m.Size() > l.MaxBytes {
		return fmt.Errorf("%d bytes, at most %d (fleet.home.max_bytes): %w", m.Size(), l.MaxBytes, ErrTooLarge)
	}
	if l.MaxFiles > 0 && len(m.Entries) > l.MaxFiles {
		return fmt.Errorf("%d files, at most %d (fleet.home.max_files): %w", len(m.Entries), l.MaxFiles, ErrTooLarge)
	}
	return nil
}

// Encode is the manifest's canonical bytes.
func (m Manifest) Encode() []byte {
	b, _ := json.Marshal(m)
	return b
}

// Hash names the manifest: the sha256 of its canonical bytes.
func (m Manifest) Hash() string { return Sum(m.Encode()) }

// Sum is the sha256 hex of b: a chunk's name.
func Sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// Size is the bytes of its regular files.
func (m Manifest) Size() int64 {
	var n int64
	for _, e := range m.Entries {
		n += e.Size
	}
	return n
}

// Chunks is every chunk the manifest names, once.
func (m Manifest) Chunks() []string {
	seen := map[string]bool{}
	var out []string
	for _, e := range m.Entries {
		for _, c := range e.Chunks {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

// Decode parses and checks a manifest: every path clean and inside the home,
// sorted and unique, chunk names sha256 hex, a regular file's chunks
// covering exactly its size.
func Decode(b []byte) (Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("%w: %v", ErrBadManifest, err)
	}
	return m, m.Validate()
}

// Validate checks what Decode checks.
func (m Manifest) Validate() error {
	for i, e := range m.Entries {
		if err := validPath(e.Path); err != nil {
			return fmt.Errorf("entry %d: %w", i, err)
		}
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			return fmt.Errorf("%w: %q after %q: entries must be sorted and unique", ErrBadManifest, e.Path, m.Entries[i-1].Path)
		}
		mode := e.FileMode()
		switch {
		case mode.IsDir(), mode&fs.ModeSymlink != 0:
			if e.Size != 0 || len(e.Chunks) != 0 {
				return fmt.Errorf("%w: %s is not a regular file but has content", ErrBadManifest, e.Path)
			}
			if mode&fs.ModeSymlink != 0 && e.Link == "" {
				return fmt.Errorf("%w: symlink %s has no target", ErrBadManifest, e.Path)
			}
		case mode.IsRegular():
			if e.Size < 0 || int64(len(e.Chunks)) != (e.Size+ChunkSize-1)/ChunkSize {
				return fmt.Errorf("%w: %s has %d bytes in %d chunks", ErrBadManifest, e.Path, e.Size, len(e.Chunks))
			}
			for _, c := range e.Chunks {
				if !ValidHash(c) {
					return fmt.Errorf("%w: %s: chunk %q is not a sha256", ErrBadManifest, e.Path, c)
				}
			}
		default:
			return fmt.Errorf("%w: %s has mode %s: only files, directories and symlinks", ErrBadManifest, e.Path, mode)
		}
	}
	return nil
}

// ValidHash reports whether h is a lowercase sha256 hex.
func ValidHash(h string) bool {
	if len(h) != 64 {
		return false
	}
	for _, c := range h {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func validPath(p string) error {
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\x00") {
		return fmt.Errorf("%w: path %q", ErrBadManifest, p)
	}
	for _, s := range strings.Split(p, "/") {
		if s == "" || s == "." || s == ".." {
			return fmt.Errorf("%w: path %q is not clean and relative", ErrBadManifest, p)
		}
	}
	return nil
}

// Change is one path that differs between two manifests.
type Change struct {
	Path string `json:"path"`
	Op   string `json:"op"` // added, removed, changed
}

// Diff lists what changed from a to b, by path.
func Diff(a, b Manifest) []Change {
	var out []Change
	i, j := 0, 0
	for i < len(a.Entries) || j < len(b.Entries) {
		switch {
		case j == len(b.Entries) || (i < len(a.Entries) && a.Entries[i].Path < b.Entries[j].Path):
			out = append(out, Change{a.Entries[i].Path, "removed"})
			i++
		case i == len(a.Entries) || b.Entries[j].Path < a.Entries[i].Path:
			out = append(out, Change{b.Entries[j].Path, "added"})
			j++
		default:
			if !sameEntry(a.Entries[i], b.Entries[j]) {
				out = append(out, Change{a.Entries[i].Path, "changed"})
			}
			i++
			j++
		}
	}
	return out
}

func sameEntry(a, b Entry) bool {
	return a.Mode == b.Mode && a.Size == b.Size && a.Link == b.Link && slices.Equal(a.Chunks, b.Chunks)
}
