package guest

import (
	"fmt"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// openPTY opens a pty pair. The master is opened non-blocking so that os.File puts it in
// the runtime poller: read deadlines then work on it, which the output drain needs.
// (os.File.Fd would switch it back to blocking, so ioctls go through SyscallConn.)
func openPTY() (master, slave *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err == nil {
		err = unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0)
	}
	if err != nil {
		unix.Close(fd)
		return nil, nil, fmt.Errorf("pty setup: %w", err)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx")
	name := "/dev/pts/" + strconv.FormatUint(uint64(n), 10)
	slave, err = os.OpenFile(name, os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		master.Close()
		return nil, nil, fmt.Errorf("open %s: %w", name, err)
	}
	return master, slave, nil
}

// ptyControl runs fn on the master's descriptor without leaving the poller. It is
// serialized with closePTY so a late resize or signal never touches a closed fd.
type ptyControl struct {
	mu     sync.Mutex
	f      *os.File
	closed bool
}

func (p *ptyControl) do(fn func(fd int) error) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f == nil || p.closed {
		return os.ErrClosed
	}
	rc, err := p.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = fn(int(fd)) }); err != nil {
		return err
	}
	return ferr
}

func (p *ptyControl) setSize(rows, cols uint16) error {
	return p.do(func(fd int) error {
		return unix.IoctlSetWinsize(fd, unix.TIOCSWINSZ, &unix.Winsize{Row: rows, Col: cols})
	})
}

// foreground returns the pty's foreground process group.
func (p *ptyControl) foreground() (int, error) {
	var g int
	err := p.do(func(fd int) error {
		var err error
		g, err = unix.IoctlGetInt(fd, unix.TIOCGPGRP)
		return err
	})
	return g, err
}

func (p *ptyControl) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.f != nil && !p.closed {
		p.closed = true
		p.f.Close()
	}
}
