package proxy

import (
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Buffer and pipe sizes of the descriptor-level mover. A read that fills
// the whole buffer marks a bulk direction, which then moves by splice(2)
// so the payload never enters user space.
var (
	moveBufSize = envInt("XCB_BUF", 32<<10)
	pipeSize    = envInt("XCB_PIPE", 1<<20)
	neverSplice = os.Getenv("XCB_RW") != ""
)

func envInt(k string, d int) int {
	if v, err := strconv.Atoi(os.Getenv(k)); err == nil {
		return v
	}
	return d
}

// rawMover copies one direction on the descriptors of two sockets. It waits
// for src to be readable before taking a buffer or a pipe, so an idle
// tunnel holds neither: only its two sockets and its goroutines. Small
// messages go through read/write with a pooled buffer, which costs fewer
// system calls than a splice round trip through a pipe; once a read fills
// the buffer the direction switches to splice for good.
type rawMover struct {
	dst      net.Conn
	src, drc syscall.RawConn

	bulk     bool // moving by splice
	noSplice bool // the kernel refused splice for these sockets

	// State shared with the callbacks below, which run synchronously
	// inside RawConn.Read/Write; preallocated so a round allocates nothing.
	buf     *[]byte
	n       int
	pipe    *pipe
	inPipe  int
	serr    error
	readFn  func(fd uintptr) bool
	drainFn func(fd uintptr) bool
	pumpFn  func(fd uintptr) bool
}

func newRawMover(dst, src net.Conn) (mover, bool) {
	drc, src2, ok := rawConns(dst, src)
	if !ok {
		return nil, false
	}
	m := &rawMover{dst: dst, src: src2, drc: drc}
	m.readFn = m.read
	m.drainFn = m.drain
	m.pumpFn = m.pump
	return m, true
}

func (m *rawMover) copy(act *activity) (int64, error) {
	defer m.releasePipe()
	var total int64
	for {
		var n int
		var eof bool
		var err error
		if m.bulk {
			n, eof, err = m.spliceOnce()
		} else {
			n, eof, err = m.readOnce()
		}
		if n > 0 {
			total += int64(n)
			act.touch()
		}
		if err != nil || eof {
			return total, err
		}
	}
}

var bufPool = sync.Pool{New: func() any { b := make([]byte, moveBufSize); return &b }}

// read is the RawConn.Read callback: it takes a buffer only for a read that
// has data, and hands it back when the socket would block.
func (m *rawMover) read(fd uintptr) bool {
	b := bufPool.Get().(*[]byte)
	n, err := syscall.Read(int(fd), *b)
	for err == syscall.EINTR {
		n, err = syscall.Read(int(fd), *b)
	}
	if err == syscall.EAGAIN {
		bufPool.Put(b)
		return false
	}
	m.buf, m.n, m.serr = b, n, err
	return true
}

func (m *rawMover) readOnce() (int, bool, error) {
	m.buf, m.n, m.serr = nil, 0, nil
	err := m.src.Read(m.readFn)
	b := m.buf
	if b == nil {
		return 0, false, err
	}
	defer bufPool.Put(b)
	if err == nil && m.serr != nil {
		err = os.NewSyscallError("read", m.serr)
	}
	if err != nil {
		return 0, false, err
	}
	if m.n == 0 {
		return 0, true, nil
	}
	w, err := m.dst.Write((*b)[:m.n])
	if err == nil && m.n == len(*b) && !m.noSplice && !neverSplice {
		m.bulk = true
	}
	return w, false, err
}

// drain is the RawConn.Read callback that moves what src holds into a pipe.
// The pipe is empty on entry, so EAGAIN means src has nothing: the pipe
// goes back to the pool for the wait.
func (m *rawMover) drain(fd uintptr) bool {
	if m.pipe == nil {
		m.pipe = getPipe()
		if m.pipe == nil {
			m.serr = syscall.EINVAL // no pipe: fall back to read/write
			return true
		}
	}
	n, err := splice(int(fd), m.pipe.w, m.pipe.size)
	if err == syscall.EAGAIN {
		putPipe(m.pipe)
		m.pipe = nil
		return false
	}
	m.inPipe, m.serr = n, err
	return true
}

// pump is the RawConn.Write callback that empties the pipe into dst.
func (m *rawMover) pump(fd uintptr) bool {
	for m.inPipe > 0 {
		n, err := splice(m.pipe.r, int(fd), m.inPipe)
		if n > 0 {
			m.inPipe -= n
			m.n += n
			continue
		}
		if err == syscall.EAGAIN {
			return false
		}
		if err == nil {
			err = syscall.EPIPE // the kernel moved nothing and said nothing
		}
		m.serr = err
		return true
	}
	return true
}

func (m *rawMover) spliceOnce() (int, bool, error) {
	m.inPipe, m.serr = 0, nil
	err := m.src.Read(m.drainFn)
	if err == nil && m.serr == syscall.EINVAL {
		// Not spliceable (some socket families): nothing was consumed.
		m.noSplice, m.bulk = true, false
		m.releasePipe()
		return 0, false, nil
	}
	if err == nil && m.serr != nil {
		err = os.NewSyscallError("splice", m.serr)
	}
	if err != nil {
		return 0, false, err
	}
	if m.inPipe == 0 {
		return 0, true, nil
	}
	m.n, m.serr = 0, nil
	err = m.drc.Write(m.pumpFn)
	if err == nil && m.serr != nil {
		err = os.NewSyscallError("splice", m.serr)
	}
	return m.n, false, err
}

// releasePipe returns the mover's pipe, or closes it if bytes are stranded
// in it after a failed write.
func (m *rawMover) releasePipe() {
	if m.pipe == nil {
		return
	}
	if m.inPipe > 0 {
		m.pipe.destroy()
	} else {
		putPipe(m.pipe)
	}
	m.pipe, m.inPipe = nil, 0
}

func splice(in, out, n int) (int, error) {
	for {
		k, err := unix.Splice(in, nil, out, nil, n, unix.SPLICE_F_NONBLOCK|unix.SPLICE_F_MOVE)
		if err != syscall.EINTR {
			return int(k), err
		}
	}
}

// pipe is a pooled pipe for splicing; its descriptors are closed when the
// pool drops it.
type pipe struct {
	fds     pipeFDs
	r, w    int
	size    int
	cleanup runtime.Cleanup
}

type pipeFDs struct{ r, w int }

var pipePool = sync.Pool{New: func() any { return newPipe() }}

func newPipe() *pipe {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil
	}
	size, err := unix.FcntlInt(uintptr(fds[0]), unix.F_SETPIPE_SZ, pipeSize)
	if err != nil {
		// Over the per-user pipe quota: a default-sized pipe still works.
		if size, err = unix.FcntlInt(uintptr(fds[0]), unix.F_GETPIPE_SZ, 0); err != nil || size <= 0 {
			size = 64 << 10
		}
	}
	p := &pipe{fds: pipeFDs{fds[0], fds[1]}, r: fds[0], w: fds[1], size: size}
	p.cleanup = runtime.AddCleanup(p, closePipe, p.fds)
	return p
}

func closePipe(f pipeFDs) {
	unix.Close(f.r)
	unix.Close(f.w)
}

func (p *pipe) destroy() {
	p.cleanup.Stop()
	closePipe(p.fds)
}

func getPipe() *pipe {
	p, _ := pipePool.Get().(*pipe)
	return p
}

func putPipe(p *pipe) { pipePool.Put(p) }
