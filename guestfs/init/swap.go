package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// swapDiscard is SWAP_FLAG_DISCARD|SWAP_FLAG_DISCARD_PAGES: freed swap is discarded,
// which punches holes in the host's sparse file, but the fresh area is not discarded
// first (a round trip to the host per 2 GiB).
const swapDiscard = 0x10000 | 0x40000

// swapOn is how many bytes of swap the guest has (enableSwap), for upperLimit.
var swapOn int64

// enableSwap makes the first size bytes of the swap disk (control.SwapSerial) a swap
// area and turns it on. It runs only once the RunSpec has arrived: a snapshot must not
// hold pages swapped out to a disk the restore replaces. A guest without the disk, or
// whose kernel refuses it, keeps to its memory.
func enableSwap(log *slog.Logger, size int64) {
	if size <= 0 {
		return
	}
	start := time.Now()
	dev, err := swapDevice()
	if err != nil {
		log.Warn("no swap", "err", err)
		return
	}
	page := int64(os.Getpagesize())
	pages := size / page
	if pages < 10 || pages-1 > int64(^uint32(0)) {
		log.Warn("no swap", "size", size)
		return
	}
	if err := writeSwapHeader(dev, page, pages); err != nil {
		log.Warn("no swap", "err", err)
		return
	}
	if err := swapon(dev, swapDiscard); err != nil {
		if err = swapon(dev, 0); err != nil {
			log.Warn("no swap", "dev", dev, "err", err)
			return
		}
	}
	swapOn = pages * page
	if err := keepMemoryFree(); err != nil {
		log.Warn("memory headroom", "err", err)
	}
	log.Info("swap on", "dev", dev, "bytes", swapOn, "took", time.Since(start).Round(time.Millisecond))
}

// memHeadroom is the memory keepMemoryFree keeps free for the kernel, at most a quarter
// of the guest's.
const memHeadroom = 48 << 20

// keepMemoryFree has the kernel keep memHeadroom free (vm.min_free_kbytes: near it,
// kswapd swaps out). Without it a full upper layer leaves memory full and, with no
// compaction in the kernel, the 9p client's message buffers (a 1 MiB allocation per
// request) fail with ENOMEM, so reading a share fails. A memory cgroup does the same
// but costs the run about 25 ms to set up under TCG.
func keepMemoryFree() error {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return err
	}
	free := min(memHeadroom, int64(si.Totalram)*int64(si.Unit)/4)
	return os.WriteFile("/proc/sys/vm/min_free_kbytes", []byte(strconv.FormatInt(free>>10, 10)), 0)
}

// swapDevice is the block device whose serial is control.SwapSerial.
func swapDevice() (string, error) {
	serials, _ := filepath.Glob("/sys/block/vd*/serial")
	for _, p := range serials {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == control.SwapSerial {
			return "/dev/" + filepath.Base(filepath.Dir(p)), nil
		}
	}
	return "", errors.New("no disk with serial " + control.SwapSerial)
}

// writeSwapHeader writes what mkswap would: the first page holds the version-1 header
// (struct swap_header: version and last_page after 1024 boot bytes) and ends with the
// SWAPSPACE2 magic.
func writeSwapHeader(dev string, page, pages int64) error {
	f, err := os.OpenFile(dev, os.O_WRONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	h := make([]byte, page)
	binary.NativeEndian.PutUint32(h[1024:], 1)               // version
	binary.NativeEndian.PutUint32(h[1028:], uint32(pages-1)) // last_page
	copy(h[page-10:], "SWAPSPACE2")
	// No sync: swapon reads it through the same page cache, and swap never writes page 0.
	if _, err := f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("swap header on %s: %w", dev, err)
	}
	return nil
}

func swapon(dev string, flags uintptr) error {
	p, err := unix.BytePtrFromString(dev)
	if err != nil {
		return err
	}
	if _, _, errno := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(p)), flags, 0); errno != 0 {
		return errno
	}
	return nil
}
