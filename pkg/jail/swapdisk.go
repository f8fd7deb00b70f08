package jail

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// Every guest has one virtio-blk disk, its swap: the upper layer of a workdir synced at
// exit lives in a guest tmpfs, and swap lets it outgrow the guest's memory. The disk is
// an unnamed sparse file (O_TMPFILE) in the cache directory, which is on a disk where
// the run dir (/run, XDG_RUNTIME_DIR) is usually a tmpfs, i.e. host memory. No other
// user can open it, no path to it exists, and it is gone when QEMU closes it, also
// when crackbox is killed. Its size is the whole bound on what the guest can make it
// take on the host: QEMU refuses writes past a raw file's end. The host formats it, so
// the guest only turns it on: written by the guest, the header cost a restored run two
// disk round trips before its command could start.

// swapMax is the swap of a run whose disk quota is unbounded, and the size the snapshot
// guest sees, so that a restored guest's view of the disk covers any run's swap.
const swapMax = 64 << 30

// swapFD is the descriptor QEMU inherits the swap disk as: right after the kernel and
// initramfs, so the command line a snapshot is keyed by does not vary.
const swapFD = 5

// swapSize is the swap a plan's guest gets: the disk quota of each share synced at
// exit (swapMax when unbounded), at most swapMax; 0 when no share is synced at exit.
func swapSize(rs control.RunSpec) int64 {
	var n int64
	for _, m := range rs.Mounts {
		if m.Sync != control.SyncExit || m.ReadOnly {
			continue
		}
		if m.SyncLimit <= 0 {
			return swapMax
		}
		n += m.SyncLimit
	}
	return min(n, swapMax)
}

// openSwapDisk makes a swap disk of size bytes in dir, else (a cache the caller may
// only read) in the temp dir, owned by QEMU's uid (nil: ours).
func openSwapDisk(dir string, size int64, vmm *vmmIdentity) (*os.File, error) {
	if dir != "" {
		if f, err := openSwapDiskIn(dir, size, vmm); err == nil {
			return f, nil
		}
	}
	return openSwapDiskIn(os.TempDir(), size, vmm)
}

func openSwapDiskIn(dir string, size int64, vmm *vmmIdentity) (_ *os.File, err error) {
	var f *os.File
	fd, err := unix.Open(dir, unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	switch {
	case err == nil:
		f = os.NewFile(uintptr(fd), "swap")
	case errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EISDIR):
		// A filesystem without O_TMPFILE: a name that lives only until the unlink.
		if f, err = os.CreateTemp(dir, ".swap-*"); err != nil {
			return nil, fmt.Errorf("swap disk: %w", err)
		}
		if err := os.Remove(f.Name()); err != nil {
			f.Close()
			return nil, fmt.Errorf("swap disk: %w", err)
		}
	default:
		return nil, fmt.Errorf("swap disk in %s: %w", dir, err)
	}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if err := f.Truncate(size); err != nil {
		return nil, fmt.Errorf("swap disk: %w", err)
	}
	if h := swapHeader(size); h != nil {
		if _, err := f.WriteAt(h, 0); err != nil {
			return nil, fmt.Errorf("swap disk: %w", err)
		}
	}
	if vmm != nil {
		if err := f.Chown(int(vmm.UID), int(vmm.GID)); err != nil {
			return nil, fmt.Errorf("swap disk: %w", err)
		}
	}
	return f, nil
}

// swapPage is the guest's page size, the unit of a swap area.
const swapPage = 4096

// swapHeader is what mkswap writes on a disk of size bytes: its first page holds the
// version-1 header (struct swap_header: version and last_page after 1024 boot bytes) and
// ends with the SWAPSPACE2 magic. A disk too small to swap on gets none (nil).
func swapHeader(size int64) []byte {
	pages := size / swapPage
	if pages < 10 || pages-1 > math.MaxUint32 {
		return nil
	}
	h := make([]byte, swapPage)
	binary.LittleEndian.PutUint32(h[1024:], 1)
	binary.LittleEndian.PutUint32(h[1028:], uint32(pages-1))
	copy(h[swapPage-10:], "SWAPSPACE2")
	return h
}
