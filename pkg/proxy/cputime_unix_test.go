//go:build unix

package proxy

import (
	"syscall"
	"time"
)

// processCPU is the CPU time, user and system, the whole test process has
// used so far: client, proxy and upstream of a benchmark together.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
