package home

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Cache is a runner's local copy of what the store holds: chunks by name,
// and per folder the index of its home on this host and, while the home
// matches a committed manifest exactly, that manifest's hash.
type Cache struct {
	Dir string
}

func (c Cache) chunkPath(h string) string { return filepath.Join(c.Dir, "chunks", h[:2], h) }

// Chunk reads a cached chunk, checking its content against its name.
func (c Cache) Chunk(h string) ([]byte, bool) {
	if !ValidHash(h) {
		return nil, false
	}
	b, err := os.ReadFile(c.chunkPath(h))
	if err != nil || Sum(b) != h {
		return nil, false
	}
	return b, true
}

// Has reports whether a chunk is cached, without reading it.
func (c Cache) Has(h string) bool {
	if !ValidHash(h) {
		return false
	}
	_, err := os.Stat(c.chunkPath(h))
	return err == nil
}

// PutChunk caches a chunk; a chunk is written once, through a rename.
func (c Cache) PutChunk(h string, b []byte) error {
	if !ValidHash(h) || Sum(b) != h {
		return fmt.Errorf("chunk %q: content does not match its name", h)
	}
	p := c.chunkPath(h)
	if _, err := os.Stat(p); err == nil {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}

func (c Cache) folderPath(folder, what string) string {
	return filepath.Join(c.Dir, "folders", base64.RawURLEncoding.EncodeToString([]byte(folder)), what)
}

// state is a folder's cache record.
type state struct {
	Index Index `json:"index"`
}

// Index is the folder's index on this host (empty if none).
func (c Cache) Index(folder string) Index {
	var s state
	if b, err := os.ReadFile(c.folderPath(folder, "index.json")); err == nil {
		json.Unmarshal(b, &s)
	}
	if s.Index == nil {
		s.Index = Index{}
	}
	return s.Index
}

// SaveIndex stores the folder's index.
func (c Cache) SaveIndex(folder string, idx Index) error {
	b, _ := json.Marshal(state{Index: idx})
	return c.writeFolder(folder, "index.json", b)
}

// Clean is the hash of the committed manifest the folder's home on this host
// matches exactly, "" when it may differ (a turn ran, or was cut off).
func (c Cache) Clean(folder string) string {
	b, err := os.ReadFile(c.folderPath(folder, "clean"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// SetClean records that the home matches manifest hash; "" forgets it.
func (c Cache) SetClean(folder, hash string) error {
	if hash == "" {
		err := os.Remove(c.folderPath(folder, "clean"))
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	return c.writeFolder(folder, "clean", []byte(hash))
}

func (c Cache) writeFolder(folder, name string, b []byte) error {
	p := c.folderPath(folder, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return err
	}
	tmp := p + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, p)
}
