package main

import (
	"context"
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

// A guest with swap planned turns it on a second into the run, or sooner once less
// than half its memory is free; it looks every swapCheck until then. Turning it on costs
// the guest tens of milliseconds under TCG, which a short run, one that ends within that
// second, never pays; half the memory is headroom enough to outrun an allocation burst
// between two looks. Looking costs a TCG guest too, so it stops with the second.
const (
	swapCheck = 20 * time.Millisecond
	swapDelay = time.Second
)

// swapLater turns on the first size bytes of the swap disk dev (swapDisk), which the host
// formatted to that size, when the run is a second old or memory fills, unless ctx ends
// first (the command did). It runs only once the RunSpec has arrived: a snapshot must
// not hold pages swapped out to a disk the restore replaces. A guest whose kernel
// refuses the disk keeps to its memory.
func swapLater(ctx context.Context, log *slog.Logger, dev string, size int64) {
	t := time.NewTicker(swapCheck)
	defer t.Stop()
	deadline := time.Now().Add(swapDelay)
	for {
		var si unix.Sysinfo_t
		if time.Now().After(deadline) || unix.Sysinfo(&si) != nil || si.Freeram < si.Totalram/2 {
			enableSwap(log, dev, size)
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// plannedSwap is the swap a guest will have (swapLater), for upperLimit: size rounded
// down to pages, none without the disk.
func plannedSwap(dev string, size int64) int64 {
	if dev == "" || size <= 0 {
		return 0
	}
	page := int64(os.Getpagesize())
	return size / page * page
}

// enableSwap turns the swap on, trying with discards first (the host may lack them).
func enableSwap(log *slog.Logger, dev string, size int64) {
	start := time.Now()
	if err := swapon(dev, swapDiscard); err != nil {
		if err = swapon(dev, 0); err != nil {
			log.Warn("no swap", "dev", dev, "err", err)
			return
		}
	}
	if err := keepMemoryFree(); err != nil {
		log.Warn("memory headroom", "err", err)
	}
	log.Info("swap on", "dev", dev, "bytes", size, "took", time.Since(start).Round(time.Millisecond))
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

// swapDisk is the block device whose serial is control.SwapSerial, "" without one. It
// is looked up at boot, before a snapshot is taken: reading the serial is a request to
// the device, which a restored run would otherwise wait for.
func swapDisk() string {
	serials, _ := filepath.Glob("/sys/block/vd*/serial")
	for _, p := range serials {
		b, err := os.ReadFile(p)
		if err == nil && strings.TrimSpace(string(b)) == control.SwapSerial {
			return "/dev/" + filepath.Base(filepath.Dir(p))
		}
	}
	return ""
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
