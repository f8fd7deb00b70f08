package host

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// ErrSharedProcfs means the kernel (before Linux 5.8) gives a pid namespace one procfs
// whose mount options every mount shares, so the jail's /proc cannot hide the host's
// processes from QEMU; the run is refused rather than started with that view.
var ErrSharedProcfs = errors.New("jail: this kernel shares one /proc per pid namespace (Linux before 5.8), so QEMU's jail cannot hide the host's processes; run crackbox on Linux 5.8 or later")

// VMMJailKernel says whether this kernel can give the jail a /proc of its own: nil, or
// ErrSharedProcfs (every root run would be refused).
func VMMJailKernel() error {
	if !kernelAtLeast(5, 8) {
		return ErrSharedProcfs
	}
	return nil
}

// kernelAtLeast says whether the running kernel's release is major.minor or later.
func kernelAtLeast(major, minor int) bool {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false
	}
	return releaseAtLeast(unix.ByteSliceToString(u.Release[:]), major, minor)
}

func releaseAtLeast(release string, major, minor int) bool {
	var ma, mi int
	if _, err := fmt.Sscanf(release, "%d.%d", &ma, &mi); err != nil {
		return false
	}
	return ma > major || (ma == major && mi >= minor)
}
