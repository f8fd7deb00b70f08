package jail

import (
	"io"
	"os"
	"syscall"
)

// consoleMax bounds console.log: the guest controls what reaches its serial console, so
// the file keeps only the newest output, between consoleMax and twice that.
const consoleMax = 1 << 20

// consoleCut starts the file once older output was dropped.
const consoleCut = "[crackbox: older console output dropped]\n"

// consoleLog copies QEMU's console output (a pipe) into a capped file.
type consoleLog struct {
	f    *os.File
	max  int64
	size int64
	done chan struct{}
}

// startConsoleLog creates path and returns the pipe end QEMU writes to; the caller
// closes its copy once QEMU has started.
func startConsoleLog(path string, max int64) (*consoleLog, *os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	c := &consoleLog{f: f, max: max, done: make(chan struct{})}
	go c.copy(r)
	return c, w, nil
}

func (c *consoleLog) copy(r *os.File) {
	defer close(c.done)
	defer r.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			c.write(buf[:n])
		}
		if err != nil {
			return
		}
	}
}

// write appends b; past twice the cap it keeps only the newest max bytes.
func (c *consoleLog) write(b []byte) {
	if c.size+int64(len(b)) > 2*c.max {
		keep := make([]byte, c.max)
		n, _ := c.f.ReadAt(keep, c.size-c.max)
		keep = append([]byte(consoleCut), keep[:n]...)
		if _, err := c.f.WriteAt(keep, 0); err == nil {
			_ = c.f.Truncate(int64(len(keep)))
			c.size = int64(len(keep))
		}
	}
	if n, err := c.f.WriteAt(b, c.size); err == nil {
		c.size += int64(n)
	}
}

// close waits for QEMU's output to be drained, then closes the file.
func (c *consoleLog) close() {
	<-c.done
	c.f.Close()
}

// tailFile returns up to n bytes from the end of path, reading only those.
func tailFile(path string, n int64) string {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		return ""
	}
	off := max(0, st.Size()-n)
	b, _ := io.ReadAll(io.NewSectionReader(f, off, st.Size()-off))
	return string(b)
}
