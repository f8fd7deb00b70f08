package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// readyMarker is the console line the host waits for before it snapshots a booted guest
// (pkg/jail/snapshot.go has the same string).
const readyMarker = "waiting for run spec"

// applyHostState seeds the kernel's CRNG and sets the wall clock from the RunSpec. A
// guest restored from a snapshot starts with the CRNG state and clock of the moment the
// snapshot was taken; on a cold boot this is harmless.
func applyHostState(rs *control.RunSpec) error {
	if len(rs.Seed) > 0 {
		if err := addEntropy(rs.Seed); err != nil {
			return fmt.Errorf("seed the kernel rng: %w", err)
		}
	}
	if rs.TimeUnixNano > 0 {
		tv := unix.NsecToTimeval(rs.TimeUnixNano)
		if err := unix.Settimeofday(&tv); err != nil {
			return fmt.Errorf("set the clock to %s: %w", time.Unix(0, rs.TimeUnixNano).UTC(), err)
		}
	}
	return nil
}

// addEntropy credits seed to the input pool (RNDADDENTROPY) and forces a reseed of the
// CRNG (RNDRESEEDCRNG), so every later read, getrandom and AT_RANDOM derives from it.
func addEntropy(seed []byte) error {
	f, err := os.OpenFile("/dev/urandom", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	// struct rand_pool_info { int entropy_count; int buf_size; __u32 buf[]; }
	info := make([]byte, 8+len(seed))
	binary.NativeEndian.PutUint32(info[0:], uint32(len(seed)*8))
	binary.NativeEndian.PutUint32(info[4:], uint32(len(seed)))
	copy(info[8:], seed)
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDADDENTROPY, uintptr(unsafe.Pointer(&info[0]))); e != 0 {
		return fmt.Errorf("RNDADDENTROPY: %w", e)
	}
	if _, _, e := unix.Syscall(unix.SYS_IOCTL, f.Fd(), unix.RNDRESEEDCRNG, 0); e != 0 {
		return fmt.Errorf("RNDRESEEDCRNG: %w", e)
	}
	return nil
}
