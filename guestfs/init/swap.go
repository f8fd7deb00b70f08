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
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// swapDiscard is SWAP_FLAG_DISCARD: freed swap is discarded, which punches holes in the
// host's sparse file.
const swapDiscard = 0x10000

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
	log.Info("swap on", "dev", dev, "bytes", swapOn)
	if err := keepMemoryFree(); err != nil {
		log.Warn("memory headroom", "err", err)
	}
}

// memHeadroom is the least memory keepMemoryFree leaves to the kernel.
const memHeadroom = 48 << 20

// memAvailable is MemAvailable of /proc/meminfo, in bytes.
func memAvailable() (int64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("/proc/meminfo has no MemAvailable")
}

// memCgroup is where guest-init mounts cgroup2 for keepMemoryFree; only root may look.
const memCgroup = "/.crackbox-cgroup"

// keepMemoryFree puts guest-init, and so the command it starts, in a memory cgroup whose
// usage past what is available now, less a headroom, is reclaimed (a tmpfs page is
// charged to whoever wrote it, so an upper layer past that goes to swap). The headroom
// stays free for the kernel: without it a full upper layer leaves memory full and, with
// no compaction in the kernel, the 9p client's message buffers (a 1 MiB allocation per
// request) fail with ENOMEM, so reading a share fails.
func keepMemoryFree() error {
	avail, err := memAvailable()
	if err != nil {
		return err
	}
	high := avail - max(memHeadroom, avail/8)
	if high <= 0 {
		return fmt.Errorf("only %d bytes of memory available", avail)
	}
	if err := os.MkdirAll(memCgroup, 0o700); err != nil {
		return err
	}
	if err := unix.Mount("cgroup2", memCgroup, "cgroup2", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
		return fmt.Errorf("mount cgroup2: %w", err)
	}
	run := memCgroup + "/run"
	for _, w := range [][2]string{
		{memCgroup + "/cgroup.subtree_control", "+memory"},
		{run + "/memory.high", strconv.FormatInt(high, 10)},
		{run + "/cgroup.procs", strconv.Itoa(os.Getpid())},
	} {
		if w[0] == run+"/memory.high" {
			if err := os.Mkdir(run, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
				return err
			}
		}
		if err := os.WriteFile(w[0], []byte(w[1]), 0); err != nil {
			return err
		}
	}
	return nil
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
	if _, err := f.WriteAt(h, 0); err != nil {
		return fmt.Errorf("swap header on %s: %w", dev, err)
	}
	return f.Sync()
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
