package jail

import (
	"errors"
	"fmt"
	"os"
	"time"
)

// Live is a running guest as Spec.Live sees it: tests use it to look at a guest
// from the host while its command runs (its RAM, its run dir). It is valid until
// Run returns.
type Live struct {
	v  *vm
	rd *runDir
}

// RunDir is the run's directory on the host: console and QEMU logs, sockets.
func (l *Live) RunDir() string { return l.rd.Dir }

// DumpMemory writes the guest's whole RAM as an ELF core (QMP dump-guest-memory)
// to a new file in the run dir, which QEMU alone may write, and returns its path.
// The caller removes the file; Run removes it with the run dir otherwise.
func (l *Live) DumpMemory(timeout time.Duration) (string, error) {
	if l.v.qmp == nil {
		return "", errors.New("jail: no QMP connection to this guest")
	}
	path := l.rd.vmPath(fmt.Sprintf("memory-%d.elf", time.Now().UnixNano()))
	args := map[string]any{"paging": false, "protocol": "file:" + path}
	if _, err := l.v.qmp.do("dump-guest-memory", args, nil, timeout); err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}
