package jail

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/host"
	"golang.org/x/sys/unix"
)

// The VMM's cgroup: one leaf per run holding QEMU and its helpers, so a guest that makes
// QEMU balloon (or a QEMU escape that forks) hits the run's own limits, never the host's.

// cgroupRoot is where cgroup hierarchies are mounted.
var cgroupRoot = host.CgroupRoot

// cgroupParent is the directory, under the v2 root or under crackbox's own cgroup of each
// v1 controller, that holds every run's leaf.
const cgroupParent = "crackbox.vmm"

// vmmMemOverhead is what QEMU needs beyond guest RAM: its own heap and code, TCG's
// translation cache (tb-size=32), the 9p and virtiofsd thread pools. A whole 512 MiB
// `true` run's leaf peaked at 150 MiB, guest pages included (BENCHMARKS.md, "VMM jail").
const vmmMemOverhead = 256 << 20

// vmmPidsMax bounds the tasks of one run's leaf: QEMU's vCPU, main, RCU and worker
// threads (9p's pool grows to 64) and every virtiofsd's pool.
const vmmPidsMax = 1024

// parentCPUWeight is the weight of the group all runs' leaves share: one ordinary
// task's per host CPU. Every VMM sits in that group, which at the default weight would
// get one task's share of a busy host for all runs together and run slower jailed than
// unjailed. The leaves' own weights (--cpus) divide the group's share between runs.
var parentCPUWeight = min(100*runtime.NumCPU(), 10000)

// cgroupLimits is what a leaf enforces.
type cgroupLimits struct {
	MemoryBytes int64
	PidsMax     int
	CPUWeight   int // 1-10000, 100 is the default share
}

// vmmLimits maps a run's --memory and --cpus onto its leaf.
func vmmLimits(memMiB, cpus int) cgroupLimits {
	return cgroupLimits{
		MemoryBytes: int64(memMiB)<<20 + vmmMemOverhead,
		PidsMax:     vmmPidsMax,
		CPUWeight:   min(100*max(cpus, 1), 10000),
	}
}

// cgroupLeaf is one run's cgroup: one directory under cgroup v2, one per controller
// under v1.
type cgroupLeaf struct {
	v2   bool
	dirs map[string]string // controller ("" for v2) -> directory
}

// cgroupSupport says whether runs get a cgroup leaf here, and why not.
func cgroupSupport() (v2 bool, err error) { return host.CgroupSupport(os.Geteuid()) }

// newCgroupLeaf makes the leaf name with its limits set. A leaf that cannot be made in
// full is removed again and the error wraps host.ErrNoCgroup.
func newCgroupLeaf(name string, lim cgroupLimits) (_ *cgroupLeaf, err error) {
	v2, err := cgroupSupport()
	if err != nil {
		return nil, err
	}
	c := &cgroupLeaf{v2: v2, dirs: map[string]string{}}
	defer func() {
		if err != nil {
			c.remove()
			err = fmt.Errorf("%w: %w", host.ErrNoCgroup, err)
		}
	}()
	if v2 {
		parent := filepath.Join(cgroupRoot, cgroupParent)
		if err := mkParentV2(parent); err != nil {
			return nil, err
		}
		c.dirs[""] = filepath.Join(parent, name)
	} else {
		for _, ctl := range []string{"memory", "pids", "cpu"} {
			parent := filepath.Join(cgroupRoot, ctl, ownCgroupV1(ctl), cgroupParent)
			if err := os.MkdirAll(parent, 0o755); err != nil {
				return nil, err
			}
			sweepLeaves(parent)
			if ctl == "cpu" {
				if err := os.WriteFile(filepath.Join(parent, "cpu.shares"), []byte(strconv.Itoa(parentCPUWeight*1024/100)), 0o644); err != nil {
					return nil, err
				}
			}
			c.dirs[ctl] = filepath.Join(parent, name)
		}
	}
	for _, d := range c.dirs {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	return c, c.set(lim)
}

// mkParentV2 makes the v2 parent with the three controllers enabled for its children.
func mkParentV2(parent string) error {
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return err
	}
	sweepLeaves(parent)
	for _, d := range []string{cgroupRoot, parent} {
		if err := os.WriteFile(filepath.Join(d, "cgroup.subtree_control"), []byte("+memory +pids +cpu"), 0o644); err != nil {
			return fmt.Errorf("enable controllers in %s: %w", d, err)
		}
	}
	return os.WriteFile(filepath.Join(parent, "cpu.weight"), []byte(strconv.Itoa(parentCPUWeight)), 0o644)
}

func (c *cgroupLeaf) set(lim cgroupLimits) error {
	type write struct{ ctl, file, val string }
	mem := strconv.FormatInt(lim.MemoryBytes, 10)
	// The swap limits exist only where swap accounting is on; without them a limit that
	// pushes pages to swap would not bound the run.
	w := []write{{"", "memory.max", mem}, {"", "memory.swap.max", "0"},
		{"", "pids.max", strconv.Itoa(lim.PidsMax)}, {"", "cpu.weight", strconv.Itoa(lim.CPUWeight)}}
	if !c.v2 {
		w = []write{{"memory", "memory.limit_in_bytes", mem}, {"memory", "memory.memsw.limit_in_bytes", mem},
			{"pids", "pids.max", strconv.Itoa(lim.PidsMax)}, {"cpu", "cpu.shares", strconv.Itoa(lim.CPUWeight * 1024 / 100)}}
	}
	for _, x := range w {
		err := os.WriteFile(filepath.Join(c.dirs[x.ctl], x.file), []byte(x.val), 0o644)
		if err != nil && !(errors.Is(err, os.ErrNotExist) && strings.Contains(x.file, "sw")) {
			return fmt.Errorf("cgroup %s: %w", x.file, err)
		}
	}
	return nil
}

// procsFiles are the files a process writes "0" to in order to join the leaf.
func (c *cgroupLeaf) procsFiles() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, d := range c.dirs {
		out = append(out, filepath.Join(d, "cgroup.procs"))
	}
	return out
}

// joinPaths says how QEMU starts in the leaf: the v2 directory it is cloned into, or the
// v1 tasks files that the thread forking it joins first and crackbox's own that the
// thread returns to after.
func (c *cgroupLeaf) joinPaths() (dir string, tasks, home []string) {
	if c == nil {
		return "", nil, nil
	}
	if c.v2 {
		return c.dirs[""], nil, nil
	}
	for ctl, d := range c.dirs {
		tasks = append(tasks, filepath.Join(d, "tasks"))
		home = append(home, filepath.Join(cgroupRoot, ctl, ownCgroupV1(ctl), "tasks"))
	}
	return "", tasks, home
}

// add moves a started helper (a virtiofsd) into the leaf; QEMU starts in it (joinPaths).
// A helper that cannot be moved runs on unbounded, logged nowhere:
// the leaf is a limit on QEMU first.
func (c *cgroupLeaf) add(pid int) {
	for _, p := range c.procsFiles() {
		_ = os.WriteFile(p, []byte(strconv.Itoa(pid)), 0o644)
	}
}

// oomKills is how many processes the leaf's memory limit killed.
func (c *cgroupLeaf) oomKills() int {
	if c == nil {
		return 0
	}
	file, key := filepath.Join(c.dirs[""], "memory.events"), "oom_kill"
	if !c.v2 {
		file = filepath.Join(c.dirs["memory"], "memory.oom_control")
	}
	f, err := os.Open(file)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), " ")
		if k == key {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// remove kills what is left in the leaf and removes it.
func (c *cgroupLeaf) remove() {
	if c == nil {
		return
	}
	for _, d := range c.dirs {
		_ = os.WriteFile(filepath.Join(d, "cgroup.kill"), []byte("1"), 0o644)
		for range 50 {
			if err := unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			killProcs(filepath.Join(d, "cgroup.procs"))
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func killProcs(procs string) {
	b, _ := os.ReadFile(procs)
	for _, s := range strings.Fields(string(b)) {
		// Never crackbox itself: a thread of it may be in the leaf for a moment while it
		// starts QEMU there (joinPaths).
		if pid, err := strconv.Atoi(s); err == nil && pid > 0 && pid != os.Getpid() {
			_ = unix.Kill(pid, unix.SIGKILL)
		}
	}
}

// leafGrace is how old an empty leaf must be before another run removes it: a younger
// one may belong to a run that has not started its VMM yet.
const leafGrace = time.Minute

// sweepLeaves removes empty leaves of runs that were killed before they could remove
// them; rmdir refuses a leaf that still holds a process.
func sweepLeaves(parent string) {
	ents, _ := os.ReadDir(parent)
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > leafGrace {
			_ = unix.Rmdir(filepath.Join(parent, e.Name()))
		}
	}
}

// ownCgroupV1 is crackbox's own cgroup path in a v1 controller's hierarchy.
func ownCgroupV1(ctl string) string {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return "/"
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if c == ctl {
				return parts[2]
			}
		}
	}
	return "/"
}
