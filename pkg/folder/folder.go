// Package folder validates folder names and maps them to directories under the
// data dir. A folder is a tenant; its name is a '/'-separated path and no name
// may reach outside <data>/folders, whatever symlinks sit inside the tree.
package folder

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrInvalidName is wrapped by every name validation failure.
var ErrInvalidName = errors.New("invalid folder name")

// ErrEscape is returned when an on-disk path would leave the folders root.
var ErrEscape = errors.New("folder path escapes the data dir")

const (
	// MaxSegment bounds one path segment in bytes.
	MaxSegment = 64
	// MaxDepth bounds the number of segments.
	MaxDepth = 16
)

// Validate checks a folder name: non-empty '/'-separated segments of at most
// MaxSegment bytes from [A-Za-z0-9._-] (and the '{sender}' template is not a
// name), no '.' or '..', no '*' or '**', no leading or trailing '/'.
func Validate(name string) error {
	bad := func(why string) error {
		return fmt.Errorf("folder %q: %s: %w", name, why, ErrInvalidName)
	}
	if name == "" {
		return bad("empty name")
	}
	if strings.HasPrefix(name, "/") {
		return bad("absolute path (write it without the leading '/')")
	}
	segs := strings.Split(name, "/")
	if len(segs) > MaxDepth {
		return bad(fmt.Sprintf("%d segments, the limit is %d", len(segs), MaxDepth))
	}
	for _, s := range segs {
		switch s {
		case "":
			return bad("empty segment (double or trailing '/')")
		case ".", "..":
			return bad(fmt.Sprintf("segment %q is not allowed", s))
		case "*", "**":
			return bad(fmt.Sprintf("segment %q is reserved for scope globs", s))
		}
		if len(s) > MaxSegment {
			return bad(fmt.Sprintf("segment %q is %d bytes, the limit is %d", s[:16]+"…", len(s), MaxSegment))
		}
		for i := 0; i < len(s); i++ {
			c := s[i]
			ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.'
			if !ok {
				return bad(fmt.Sprintf("segment %q has illegal character %q (allowed: letters, digits, '-', '_', '.')", s, c))
			}
		}
	}
	return nil
}

// Parent returns the parent folder name, or "" for a top-level folder.
func Parent(name string) string {
	i := strings.LastIndexByte(name, '/')
	if i < 0 {
		return ""
	}
	return name[:i]
}

// Ancestors returns name's ancestors from the root down, followed by name itself:
// "a/b/c" gives ["a", "a/b", "a/b/c"].
func Ancestors(name string) []string {
	var out []string
	for i := 0; i < len(name); i++ {
		if name[i] == '/' {
			out = append(out, name[:i])
		}
	}
	return append(out, name)
}

// Within reports whether name is root itself or lies below it, comparing whole
// segments ("corp/eng" is not within "corp/e"). This is the folder-prefix test;
// it never goes near SQL LIKE.
func Within(name, root string) bool {
	if name == root {
		return true
	}
	return strings.HasPrefix(name, root+"/")
}

// Root is the directory holding every folder: <data>/folders.
func Root(dataDir string) string { return filepath.Join(dataDir, "folders") }

// Path resolves name to its directory under <data>/folders without creating it.
// Each existing component is checked with Lstat: a symlink anywhere on the
// path is refused, so a link planted inside the tree cannot point out of it.
func Path(dataDir, name string) (string, error) {
	if err := Validate(name); err != nil {
		return "", err
	}
	root, err := filepath.Abs(Root(dataDir))
	if err != nil {
		return "", fmt.Errorf("folder %q: data dir: %w", name, err)
	}
	p := filepath.Join(root, filepath.FromSlash(name))
	rel, err := filepath.Rel(root, p)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", fmt.Errorf("folder %q: %w", name, ErrEscape)
	}
	if fi, err := os.Lstat(root); err == nil && fi.Mode()&os.ModeSymlink != 0 {
		return "", fmt.Errorf("folder %q: folders root %s is a symlink: %w", name, root, ErrEscape)
	}
	cur := root
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, seg)
		fi, err := os.Lstat(cur)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			return "", fmt.Errorf("folder %q: %s is a symlink: %w", name, cur, ErrEscape)
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("folder %q: %s is not a directory: %w", name, cur, ErrEscape)
		}
	}
	return p, nil
}

// Ensure resolves name like Path and creates the directory (mode 0750). It
// creates one component at a time and re-checks each with Lstat, so a symlink
// raced into place between checks is still refused.
func Ensure(dataDir, name string) (string, error) {
	p, err := Path(dataDir, name)
	if err != nil {
		return "", err
	}
	root, _ := filepath.Abs(Root(dataDir))
	if err := os.MkdirAll(root, 0o750); err != nil {
		return "", fmt.Errorf("folder %q: %w", name, err)
	}
	if fi, err := os.Lstat(root); err != nil || fi.Mode()&os.ModeSymlink != 0 {
		return "", fmt.Errorf("folder %q: folders root %s is a symlink or unreadable: %w", name, root, ErrEscape)
	}
	cur := root
	for _, seg := range strings.Split(filepath.FromSlash(name), string(filepath.Separator)) {
		cur = filepath.Join(cur, seg)
		if err := os.Mkdir(cur, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		fi, err := os.Lstat(cur)
		if err != nil {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("folder %q: %s is not a plain directory: %w", name, cur, ErrEscape)
		}
	}
	return p, nil
}
