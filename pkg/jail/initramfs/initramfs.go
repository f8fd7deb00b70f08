// Package initramfs builds the guest's initramfs: an uncompressed newc cpio holding
// guest-init as /init, /dev/console and the empty directories PID 1 mounts onto.
// Uncompressed because unpacking is emulated instruction by instruction under TCG and
// the minimal kernel carries no decompressor.
package initramfs

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// format is mixed into the cache key; bump it when the layout below changes.
const format = "crackbox-initramfs-1"

// Mode type bits as cpio stores them.
const (
	typeDir  = 0o040000
	typeReg  = 0o100000
	typeChar = 0o020000
)

// entry is one archive member.
type entry struct {
	name       string
	mode       uint32
	rmaj, rmin uint32
	data       []byte
}

func layout(initBin []byte) []entry {
	return []entry{
		{name: "dev", mode: typeDir | 0o755},
		// The kernel opens /dev/console for PID 1's stdio before devtmpfs is mounted.
		{name: "dev/console", mode: typeChar | 0o600, rmaj: 5, rmin: 1},
		{name: "proc", mode: typeDir | 0o555},
		{name: "sys", mode: typeDir | 0o555},
		{name: "run", mode: typeDir | 0o755},
		{name: "tmp", mode: typeDir | 0o1777},
		{name: "init", mode: typeReg | 0o755, data: initBin},
	}
}

// Write writes the initramfs for the guest-init binary initBin to w.
func Write(w io.Writer, initBin []byte) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	for i, e := range layout(initBin) {
		if err := writeEntry(bw, uint32(i+1), e); err != nil {
			return fmt.Errorf("initramfs: write %s: %w", e.name, err)
		}
	}
	if err := writeEntry(bw, 0, entry{name: "TRAILER!!!"}); err != nil {
		return fmt.Errorf("initramfs: write trailer: %w", err)
	}
	return bw.Flush()
}

var zeros [4]byte

func pad4(n int) int { return (4 - n%4) % 4 }

func writeEntry(w io.Writer, ino uint32, e entry) error {
	nlink := uint32(1)
	if e.mode&typeDir != 0 && e.mode&typeReg == 0 {
		nlink = 2
	}
	if e.name == "TRAILER!!!" {
		nlink = 1
	}
	// newc: magic, then ino mode uid gid nlink mtime filesize devmajor devminor
	// rdevmajor rdevminor namesize check, each eight hex digits.
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, e.mode, 0, 0, nlink, 0, len(e.data), 0, 0, e.rmaj, e.rmin, len(e.name)+1, 0)
	if _, err := io.WriteString(w, hdr+e.name+"\x00"); err != nil {
		return err
	}
	if _, err := w.Write(zeros[:pad4(len(hdr)+len(e.name)+1)]); err != nil {
		return err
	}
	if _, err := w.Write(e.data); err != nil {
		return err
	}
	_, err := w.Write(zeros[:pad4(len(e.data))])
	return err
}

// Ensure returns the path of a cached initramfs for the guest-init binary at
// guestInitPath, building it in cacheDir on first use. The file name carries a hash of
// the binary, so a rebuilt guest-init gets a new archive; concurrent callers are safe
// because the archive appears by atomic rename.
func Ensure(guestInitPath, cacheDir string) (string, error) {
	initBin, err := os.ReadFile(guestInitPath)
	if err != nil {
		return "", fmt.Errorf("initramfs: read guest-init %q (build it with `make guest-init`): %w", guestInitPath, err)
	}
	if len(initBin) < 4 || string(initBin[:4]) != "\x7fELF" {
		return "", fmt.Errorf("initramfs: guest-init %q is not an ELF binary; build it with `make guest-init`", guestInitPath)
	}
	h := sha256.New()
	io.WriteString(h, format)
	h.Write(initBin)
	path := filepath.Join(cacheDir, "initramfs-"+hex.EncodeToString(h.Sum(nil))[:16]+".cpio")
	if _, err := os.Stat(path); err == nil {
		return path, nil
	} else if !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("initramfs: cache dir: %w", err)
	}
	tmp, err := os.CreateTemp(cacheDir, ".initramfs-*.tmp")
	if err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	defer os.Remove(tmp.Name()) // no-op after the rename
	if err := Write(tmp, initBin); err != nil {
		tmp.Close()
		return "", err
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return "", fmt.Errorf("initramfs: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("initramfs: %w", err)
	}
	return path, nil
}
