// Package proctest finds a test's own child processes, for tests about the helpers a
// run starts (share servers) and must end.
package proctest

import (
	"bytes"
	"os"
	"strconv"
)

// Children lists the pids of this process's children whose command line is name.
func Children(name string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	parent := []byte("PPid:\t" + strconv.Itoa(os.Getpid()) + "\n")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		if string(bytes.TrimRight(cmdline, "\x00")) == name && bytes.Contains(status, parent) {
			pids = append(pids, pid)
		}
	}
	return pids
}
