package jail

import (
	"os"

	"github.com/crackbox/crackbox/internal/logfile"
)

// consoleMax bounds console.log: the guest controls what reaches its serial console, so
// console.log and console.log.1 keep only the newest output, at most twice consoleMax.
const consoleMax = 1 << 20

// consoleLog copies QEMU's console output (a pipe) into a capped log.
type consoleLog struct {
	log  *logfile.File
	done chan struct{}
}

// startConsoleLog creates path and returns the pipe end QEMU writes to; the caller
// closes its copy once QEMU has started.
func startConsoleLog(path string, max int64) (*consoleLog, *os.File, error) {
	l, err := logfile.Open(path, max, 0o600)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	c := &consoleLog{log: l, done: make(chan struct{})}
	go c.copy(r)
	return c, w, nil
}

// copy drains the pipe to its end even when a write fails, so QEMU never blocks on
// its console.
func (c *consoleLog) copy(r *os.File) {
	defer close(c.done)
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			_, _ = c.log.Write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// close waits for QEMU's output to be drained, then closes the log.
func (c *consoleLog) close() {
	<-c.done
	c.log.Close()
}
