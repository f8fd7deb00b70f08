package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
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
	if _, err := l.v.qmp.runArgs("dump-guest-memory", args, timeout); err != nil {
		os.Remove(path)
		return "", err
	}
	return path, nil
}

// runArgs is run with arguments; a QMP error reply is an error.
func (m *monitor) runArgs(cmd string, args any, timeout time.Duration) ([]byte, error) {
	b, _ := json.Marshal(qmp.Command{Execute: cmd, Args: args})
	type reply struct {
		out []byte
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		out, err := m.m.Run(b)
		ch <- reply{out, err}
	}()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("qmp %s: %w", cmd, os.ErrDeadlineExceeded)
	}
}
