package initramfs

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// File is an extra regular file for the initramfs, e.g. a kernel module a modular guest
// kernel needs before it can reach its devices.
type File struct {
	Name string // path inside the archive, relative and clean, e.g. "crackbox-modules/fuse.ko"
	Perm uint32 // permission bits, e.g. 0o644
	Data []byte
}

// formatExtra is mixed into the cache key of archives with extra files.
const formatExtra = "crackbox-initramfs-extra-1"

// WriteExtra writes the initramfs for initBin plus extra files (and their parent
// directories) to w.
func WriteExtra(w io.Writer, initBin []byte, extra []File) error {
	entries, err := extraLayout(initBin, extra)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	for i, e := range entries {
		if err := writeEntry(bw, uint32(i+1), e); err != nil {
			return fmt.Errorf("initramfs: write %s: %w", e.name, err)
		}
	}
	if err := writeEntry(bw, 0, entry{name: "TRAILER!!!"}); err != nil {
		return fmt.Errorf("initramfs: write trailer: %w", err)
	}
	return bw.Flush()
}

// extraLayout is the base layout followed by the extra files. The kernel does not create
// missing parents while unpacking, so each parent directory comes first.
func extraLayout(initBin []byte, extra []File) ([]entry, error) {
	entries := layout(initBin)
	have := map[string]bool{}
	for _, e := range entries {
		have[e.name] = true
	}
	files := append([]File(nil), extra...)
	sort.Slice(files, func(i, j int) bool { return files[i].Name < files[j].Name })
	for _, f := range files {
		if f.Name == "" || path.IsAbs(f.Name) || path.Clean(f.Name) != f.Name || strings.HasPrefix(f.Name, "../") || f.Name == ".." {
			return nil, fmt.Errorf("initramfs: extra file name %q must be a clean relative path", f.Name)
		}
		if have[f.Name] {
			return nil, fmt.Errorf("initramfs: extra file %q clashes with another entry", f.Name)
		}
		var parents []string
		for d := path.Dir(f.Name); d != "."; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if !have[d] {
				have[d] = true
				entries = append(entries, entry{name: d, mode: typeDir | 0o755})
			}
		}
		have[f.Name] = true
		entries = append(entries, entry{name: f.Name, mode: typeReg | (f.Perm & 0o7777), data: f.Data})
	}
	return entries, nil
}

// EnsureExtra is Ensure for an archive that also carries extra files; the cache key
// covers guest-init and every extra file's name, mode and content.
func EnsureExtra(guestInitPath, cacheDir string, extra []File) (string, error) {
	if len(extra) == 0 {
		return Ensure(guestInitPath, cacheDir)
	}
	initBin, err := os.ReadFile(guestInitPath)
	if err != nil {
		return "", fmt.Errorf("initramfs: read guest-init %q (build it with `make guest-init`): %w", guestInitPath, err)
	}
	if len(initBin) < 4 || string(initBin[:4]) != "\x7fELF" {
		return "", fmt.Errorf("initramfs: guest-init %q is not an ELF binary; build it with `make guest-init`", guestInitPath)
	}
	entries, err := extraLayout(initBin, extra)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	io.WriteString(h, formatExtra)
	for _, e := range entries {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(e.name)))
		h.Write(n[:])
		io.WriteString(h, e.name)
		binary.LittleEndian.PutUint32(n[:4], e.mode)
		h.Write(n[:4])
		binary.LittleEndian.PutUint64(n[:], uint64(len(e.data)))
		h.Write(n[:])
		h.Write(e.data)
	}
	p := filepath.Join(cacheDir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	return p, writeCached(p, cacheDir, func(w io.Writer) error { return WriteExtra(w, initBin, extra) })
}

// writeCached creates path by write unless it exists; the file appears by atomic rename,
// so concurrent callers are safe.
func writeCached(path, cacheDir string, write func(io.Writer) error) error {
	if _, err := os.Stat(path); err == nil {
		return nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return fmt.Errorf("initramfs: cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".initramfs-*.tmp")
	if err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("initramfs: %w", err)
	}
	return nil
}
