package jail

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Before a snapshot is taken the guest should have settled: guest-init printed that it
// waits for the RunSpec, and its last goroutines and the kernel's deferred work should
// be done, so a restored guest starts with nothing left over. The guest's own signal
// for that is the idle loop: every vCPU halts, and QEMU's vCPU threads (their ids come
// from QMP query-cpus-fast) sleep instead of running. waitVCPUsIdle watches them from
// the host.
const (
	idlePoll    = 5 * time.Millisecond
	idleSamples = 3                      // consecutive quiet polls
	idleRunMax  = 500 * time.Microsecond // vCPU run time per poll that still counts as halted
)

// vcpuSample is one vCPU thread's state and total run time.
type vcpuSample struct {
	state byte
	run   uint64 // ns on a CPU, from schedstat
}

// vcpuTasks returns the /proc task directories of pid's threads tids, or nil when one
// is not there (QEMU in another pid namespace reports ids this process cannot see).
func vcpuTasks(pid int, tids []int) []string {
	var out []string
	for _, tid := range tids {
		t := filepath.Join("/proc", strconv.Itoa(pid), "task", strconv.Itoa(tid))
		if _, err := os.Stat(t); err != nil {
			return nil
		}
		out = append(out, t)
	}
	return out
}

func readVCPU(task string) (vcpuSample, bool) {
	st, err := os.ReadFile(filepath.Join(task, "stat"))
	if err != nil {
		return vcpuSample{}, false
	}
	i := bytes.LastIndexByte(st, ')')
	if i < 0 || i+2 >= len(st) {
		return vcpuSample{}, false
	}
	ss, err := os.ReadFile(filepath.Join(task, "schedstat"))
	if err != nil {
		return vcpuSample{}, false
	}
	f := strings.Fields(string(ss))
	if len(f) == 0 {
		return vcpuSample{}, false
	}
	run, err := strconv.ParseUint(f[0], 10, 64)
	if err != nil {
		return vcpuSample{}, false
	}
	return vcpuSample{state: st[i+2], run: run}, true
}

// errNoVCPUThreads: the process shows no vCPU threads this process can read.
var errNoVCPUThreads = errors.New("no readable vcpu threads")

// waitVCPUsIdle waits until every vCPU thread (tids) of pid has been asleep, or run
// less than idleRunMax, for idleSamples polls in a row. It returns false when timeout or
// ctx ends first, and errNoVCPUThreads when it cannot watch them (the caller then waits
// a fixed time instead).
func waitVCPUsIdle(ctx context.Context, pid int, tids []int, timeout time.Duration) (bool, error) {
	tasks := vcpuTasks(pid, tids)
	if len(tasks) == 0 {
		return false, errNoVCPUThreads
	}
	prev := make([]vcpuSample, len(tasks))
	for i, t := range tasks {
		s, ok := readVCPU(t)
		if !ok {
			return false, errNoVCPUThreads
		}
		prev[i] = s
	}
	deadline := time.Now().Add(timeout)
	quiet := 0
	for quiet < idleSamples {
		if time.Now().After(deadline) {
			return false, nil
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(idlePoll):
		}
		still := true
		for i, t := range tasks {
			s, ok := readVCPU(t)
			if !ok {
				return false, errNoVCPUThreads
			}
			if s.state == 'R' || s.run-prev[i].run > uint64(idleRunMax) {
				still = false
			}
			prev[i] = s
		}
		if still {
			quiet++
		} else {
			quiet = 0
		}
	}
	return true, nil
}
