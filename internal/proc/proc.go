// Package proc is the host processes crackbox and arizuko start and watch: children that
// die with their parent and are ended with their process group after a grace period, and
// start times that tell a dead run's leftovers from a live run's across pid reuse.
package proc

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Start returns field 22 (starttime) of /proc/PID/stat. The command name in field 2
// may hold spaces and parens, so parsing starts after the last ')'. A process that is
// gone gives an error wrapping os.ErrNotExist.
func Start(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, fmt.Errorf("proc: pid %d: %w", pid, err)
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc: malformed /proc/%d/stat", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, fmt.Errorf("proc: short /proc/%d/stat", pid)
	}
	return strconv.ParseUint(f[19], 10, 64)
}
