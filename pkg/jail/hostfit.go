package jail

import (
	"bufio"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Where hostFit reads the host; tests point them at fakes.
var (
	hostMemInfo = "/proc/meminfo"
	hostCPUs    = runtime.NumCPU
)

// checkHostFit refuses guest sizes this host cannot give before anything starts: more
// vCPUs than the host has CPUs to run them on (runtime.NumCPU, which honours the
// affinity mask), or more memory than the host has available. Either would otherwise
// show as a guest that crawls, or one the OOM killer ends halfway through the command.
func checkHostFit(cpus, memMiB int) error {
	if n := hostCPUs(); cpus > n {
		return fmt.Errorf("%w: cpus %d: this host has %d CPUs; give the guest %d or fewer (--cpus)", ErrBadSpec, cpus, n, n)
	}
	avail, err := availableMiB(hostMemInfo)
	if err != nil {
		// No figure to judge by (no /proc, an unusual kernel): QEMU tells if it fails.
		return nil
	}
	if int64(memMiB) > avail {
		return fmt.Errorf("%w: memory %d MiB: this host has %d MiB available; give the guest %dM or less (--memory)", ErrBadSpec, memMiB, avail, avail)
	}
	return nil
}

// availableMiB reads MemAvailable, the kernel's estimate of memory a new workload can
// take without swapping, from a /proc/meminfo file.
func availableMiB(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%s: MemAvailable %q: %w", path, rest, err)
		}
		return kb >> 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("%s: no MemAvailable line", path)
}
