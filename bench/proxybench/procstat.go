package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/PID/stat; Linux
// fixes it at 100 on every architecture Go supports.
const clockTicks = 100

// tree returns pid and all its descendants, so a proxy that forks helpers
// or workers is charged for them too.
func tree(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if pp, err := ppid(p); err == nil {
			children[pp] = append(children[pp], p)
		}
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, children[out[i]]...)
	}
	return out
}

// statFields returns the fields of /proc/PID/stat after the command name,
// which may itself contain spaces and parentheses.
func statFields(pid int) ([]string, error) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, fmt.Errorf("pid %d: malformed stat", pid)
	}
	return strings.Fields(string(b[i+1:])), nil
}

func ppid(pid int) (int, error) {
	f, err := statFields(pid)
	if err != nil || len(f) < 2 {
		return 0, fmt.Errorf("pid %d: no ppid", pid)
	}
	return strconv.Atoi(f[1])
}

// treeRSS sums VmRSS over the process tree, in bytes.
func treeRSS(pid int) (int64, error) {
	var total int64
	for i, p := range tree(pid) {
		kb, err := vmRSS(p)
		if err != nil {
			if i == 0 {
				return 0, err
			}
			continue // a child that just exited
		}
		total += kb << 10
	}
	return total, nil
}

func vmRSS(pid int) (int64, error) {
	f, err := os.Open(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("pid %d: no VmRSS in status", pid)
}

// treeFDs counts open descriptors over the process tree.
func treeFDs(pid int) int {
	n := 0
	for _, p := range tree(pid) {
		ents, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(p), "fd"))
		if err == nil {
			n += len(ents)
		}
	}
	return n
}

// treeCPU sums user+system CPU seconds over the process tree.
func treeCPU(pid int) (float64, error) {
	var ticks int64
	for i, p := range tree(pid) {
		f, err := statFields(p)
		if err != nil || len(f) < 13 {
			if i == 0 {
				return 0, fmt.Errorf("pid %d: %v", pid, err)
			}
			continue
		}
		// Fields 14 and 15 of stat (utime, stime) are 11 and 12 after the name.
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		ticks += u + s
	}
	return float64(ticks) / clockTicks, nil
}

// percentile returns the p-th percentile (nearest rank) of ds.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	k := int(p/100*float64(len(s))+0.999999) - 1
	return s[max(0, min(k, len(s)-1))]
}
