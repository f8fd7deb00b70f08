// Package folder validates folder names and maps them to directories under the
// data dir. A folder is a tenant; its name is a '/'-separated path and no name
// may reach outside <data>/folders, whatever symlinks sit inside the tree.
//
// The tree <data>/folders/<name> is host-side only and never shared. What a
// folder's guest sees is its home, <data>/homes/<escaped name>: homes are flat
// siblings, so no guest-writable directory is an ancestor of another folder's
// home and a parent's guest cannot swap a child's home for a symlink.
package folder

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
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

// Ensure resolves name like Path and creates the directory (mode 0750), and
// the folder's home with EnsureHome. It creates one component at a time and
// re-checks each with Lstat, so a symlink raced into place between checks is
// still refused.
func Ensure(dataDir, name string) (string, error) {
	p, err := ensureTree(dataDir, name)
	if err != nil {
		return "", err
	}
	if _, err := EnsureHome(dataDir, name); err != nil {
		return "", err
	}
	return p, nil
}

func ensureTree(dataDir, name string) (string, error) {
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

// HomesRoot is the directory holding every folder's home: <data>/homes.
func HomesRoot(dataDir string) string { return filepath.Join(dataDir, "homes") }

// maxHomeName keeps an escaped home name well under NAME_MAX (255).
const maxHomeName = 200

// HomeName is the single path element naming a folder's home: '/' becomes
// "%2F" ("corp/eng" gives "corp%2Feng"). '%' and '~' never occur in a valid
// name, so the escape is injective; a name too long for one element becomes
// a readable prefix, '~' and a SHA-256 of the whole name.
func HomeName(name string) string {
	esc := strings.ReplaceAll(name, "/", "%2F")
	if len(esc) <= maxHomeName {
		return esc
	}
	sum := sha256.Sum256([]byte(name))
	return esc[:maxHomeName-65] + "~" + hex.EncodeToString(sum[:])
}

// Home resolves name to its home, <data>/homes/<HomeName(name)>, the
// directory its guest gets read-write, without creating it. The homes root
// and the home itself must not be symlinks.
func Home(dataDir, name string) (string, error) {
	if err := Validate(name); err != nil {
		return "", err
	}
	root, err := filepath.Abs(HomesRoot(dataDir))
	if err != nil {
		return "", fmt.Errorf("folder %q: data dir: %w", name, err)
	}
	p := filepath.Join(root, HomeName(name))
	if filepath.Dir(p) != root {
		return "", fmt.Errorf("folder %q: %w", name, ErrEscape)
	}
	for _, c := range []string{root, p} {
		fi, err := os.Lstat(c)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("folder %q: %s is not a plain directory: %w", name, c, ErrEscape)
		}
	}
	return p, nil
}

// EnsureHome resolves name like Home and creates the homes root and the home
// (mode 0750), re-checking both with Lstat after creating them.
func EnsureHome(dataDir, name string) (string, error) {
	p, err := Home(dataDir, name)
	if err != nil {
		return "", err
	}
	root := filepath.Dir(p)
	if err := os.MkdirAll(filepath.Dir(root), 0o750); err != nil {
		return "", fmt.Errorf("folder %q: %w", name, err)
	}
	for _, c := range []string{root, p} {
		if err := os.Mkdir(c, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		fi, err := os.Lstat(c)
		if err != nil {
			return "", fmt.Errorf("folder %q: %w", name, err)
		}
		if fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
			return "", fmt.Errorf("folder %q: %s is not a plain directory: %w", name, c, ErrEscape)
		}
	}
	return p, nil
}

// RemovedHomes is the directory, inside the homes root, holding the homes
// of removed folders. '#' never occurs in a HomeName, so no folder's Home is
// this directory or lies inside it.
const RemovedHomes = "#removed"

// RetireHome moves a removed folder's home to
// <data>/homes/#removed/<HomeName>-<unix nanos> (mode 0700, the daemon's
// own), so a folder later created under the same name starts with an empty
// home and no guest is given the old one. It returns where the home went,
// "" when the folder had none. The move stays inside the homes root, so it
// is a rename on the same file system even when the homes are on shared
// storage.
func RetireHome(dataDir, name string, now time.Time) (string, error) {
	p, err := Home(dataDir, name)
	if err != nil {
		return "", err
	}
	if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("folder %q: home: %w", name, err)
	}
	dir := filepath.Join(filepath.Dir(p), RemovedHomes)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("folder %q: %w", name, err)
	}
	if fi, err := os.Lstat(dir); err != nil || fi.Mode()&os.ModeSymlink != 0 || !fi.IsDir() {
		return "", fmt.Errorf("folder %q: %s is not a plain directory: %w", name, dir, ErrEscape)
	}
	dst := filepath.Join(dir, fmt.Sprintf("%s-%d", HomeName(name), now.UnixNano()))
	if err := os.Rename(p, dst); err != nil {
		return "", fmt.Errorf("folder %q: moving its home aside: %w", name, err)
	}
	return dst, nil
}
