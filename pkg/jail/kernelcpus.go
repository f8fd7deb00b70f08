package jail

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// MaxCPUs is the most vCPUs a guest may have: CONFIG_NR_CPUS of the minimal kernel
// (guestfs/kernel/config.fragment; a test keeps the two equal). A kernel boots no more
// CPUs than its NR_CPUS and says nothing, so more would only waste host threads.
const MaxCPUs = 64

// kernelNRCPUs returns CONFIG_NR_CPUS from the config file a kernel build leaves beside
// the image: <dir>/config from guestfs/kernel/build.sh, or <dir>/boot/config-<release>
// from guestfs/kernel/debian.sh. Without one it returns 0.
func kernelNRCPUs(kernel string) (int, string) {
	kdir := filepath.Dir(kernel)
	cands := []string{filepath.Join(kdir, "config")}
	if filepath.Base(kdir) == "boot" {
		cands = append(cands, globAll(filepath.Join(kdir, "config-*"))...)
	} else {
		cands = append(cands, globAll(filepath.Join(kdir, "boot", "config-*"))...)
	}
	for _, c := range cands {
		if n := readNRCPUs(c); n > 0 {
			return n, c
		}
	}
	return 0, ""
}

func globAll(pattern string) []string {
	m, _ := filepath.Glob(pattern)
	return m
}

func readNRCPUs(path string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CONFIG_NR_CPUS="); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}

// checkKernelCPUs refuses more vCPUs than the kernel supports (when its config says).
func checkKernelCPUs(kernel string, cpus int) error {
	n, src := kernelNRCPUs(kernel)
	if n > 0 && cpus > n {
		return fmt.Errorf("%w: cpus %d: the guest kernel %s starts at most %d (CONFIG_NR_CPUS in %s); use --cpus %d or a kernel built with more",
			ErrBadSpec, cpus, kernel, n, src, n)
	}
	return nil
}
