package host

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// CgroupRoot is where cgroup hierarchies are mounted.
const CgroupRoot = "/sys/fs/cgroup"

// ErrNoCgroup means no cgroup could be made for the VMM; the run goes on without limits.
var ErrNoCgroup = errors.New("jail: no cgroup for the vmm")

// CgroupSupport says whether runs of a crackbox running as euid get a cgroup leaf,
// and why not.
func CgroupSupport(euid int) (v2 bool, err error) {
	if euid != 0 {
		return false, fmt.Errorf("%w: crackbox is unprivileged and no cgroup v2 subtree is delegated to it, so QEMU runs without memory, pids and cpu limits of its own (run as root for them)", ErrNoCgroup)
	}
	if isCgroup2(CgroupRoot) {
		// QEMU is cloned straight into its v2 leaf (clone3 with CLONE_INTO_CGROUP).
		if !kernelAtLeast(5, 7) {
			return true, fmt.Errorf("%w: this kernel is older than Linux 5.7 and cannot start a process inside a cgroup v2 leaf", ErrNoCgroup)
		}
		ctrl, _ := os.ReadFile(filepath.Join(CgroupRoot, "cgroup.controllers"))
		for _, c := range []string{"memory", "pids", "cpu"} {
			if !strings.Contains(" "+strings.TrimSpace(string(ctrl))+" ", " "+c+" ") {
				return true, fmt.Errorf("%w: the cgroup v2 root lacks the %s controller", ErrNoCgroup, c)
			}
		}
		return true, nil
	}
	for _, c := range []string{"memory", "pids", "cpu"} {
		if _, err := os.Stat(filepath.Join(CgroupRoot, c, "cgroup.procs")); err != nil {
			return false, fmt.Errorf("%w: neither cgroup v2 nor a v1 %s hierarchy at %s", ErrNoCgroup, c, CgroupRoot)
		}
	}
	return false, nil
}

// Cgroup2 says whether CgroupRoot is a cgroup v2 hierarchy (else runs use v1's).
func Cgroup2() bool { return isCgroup2(CgroupRoot) }

func isCgroup2(dir string) bool {
	var st unix.Statfs_t
	return unix.Statfs(dir, &st) == nil && st.Type == unix.CGROUP2_SUPER_MAGIC
}
