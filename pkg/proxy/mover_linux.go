package proxy

import (
	"net"
	"os"
	"sync"
	"syscall"
)

// Buffer sizes of the descriptor-level mover. A direction starts with a
// small buffer; a read that fills it marks a bulk transfer, which then
// reads up to bulkBufSize at a time. Measured on loopback, read/write with a
// 1 MiB buffer moved a 1 GiB download faster than splice(2) through a 1 MiB
// pipe and cost less CPU end to end (see BENCHMARKS.md).
const (
	smallBufSize = 16 << 10
	bulkBufSize  = 1 << 20
)

var (
	smallBufs = sync.Pool{New: func() any { b := make([]byte, smallBufSize); return &b }}
	bulkBufs  = sync.Pool{New: func() any { b := make([]byte, bulkBufSize); return &b }}
)

// rawMover copies one direction on the descriptors of two sockets. It waits
// for src to be readable before it takes a buffer from the pool, and hands
// the buffer back as soon as the bytes are written, so an idle tunnel holds
// no buffer: only its two sockets and its goroutines.
type rawMover struct {
	dst  net.Conn
	src  syscall.RawConn
	bulk bool

	// Results of the read callback, which runs synchronously inside
	// RawConn.Read; readFn is bound once so a round allocates nothing.
	buf    *[]byte
	n      int
	serr   error
	readFn func(fd uintptr) bool
}

// newRawMover accepts only plain TCP and Unix sockets as src: a wrapper
// that offers SyscallConn may keep bytes of its own in a buffer, which
// reading the descriptor directly would skip.
func newRawMover(dst, src net.Conn) (mover, bool) {
	var rc syscall.RawConn
	var err error
	switch s := src.(type) {
	case *net.TCPConn:
		rc, err = s.SyscallConn()
	case *net.UnixConn:
		rc, err = s.SyscallConn()
	default:
		return nil, false
	}
	if err != nil {
		return nil, false
	}
	m := &rawMover{dst: dst, src: rc}
	m.readFn = m.read
	return m, true
}

func (m *rawMover) pool() *sync.Pool {
	if m.bulk {
		return &bulkBufs
	}
	return &smallBufs
}

func (m *rawMover) copy(act *activity) (int64, error) {
	var total int64
	for {
		n, eof, err := m.once()
		if n > 0 {
			total += int64(n)
			act.touch()
		}
		if err != nil || eof {
			return total, err
		}
	}
}

// read is the RawConn.Read callback. Returning false makes RawConn.Read
// wait for readability (or the read deadline) and call it again, so the
// buffer goes back to the pool for the wait.
func (m *rawMover) read(fd uintptr) bool {
	b := m.pool().Get().(*[]byte)
	n, err := syscall.Read(int(fd), *b)
	for err == syscall.EINTR {
		n, err = syscall.Read(int(fd), *b)
	}
	if err == syscall.EAGAIN {
		m.pool().Put(b)
		return false
	}
	m.buf, m.n, m.serr = b, n, err
	return true
}

// once moves one read's worth of bytes; eof reports that src has ended.
func (m *rawMover) once() (n int, eof bool, err error) {
	m.buf, m.n, m.serr = nil, 0, nil
	err = m.src.Read(m.readFn)
	b := m.buf
	if b == nil {
		return 0, false, err
	}
	pool := m.pool()
	defer pool.Put(b)
	if err == nil && m.serr != nil {
		err = os.NewSyscallError("read", m.serr)
	}
	if err != nil {
		return 0, false, err
	}
	if m.n == 0 {
		return 0, true, nil
	}
	full := m.n == len(*b)
	n, err = m.dst.Write((*b)[:m.n])
	if full {
		m.bulk = true
	}
	return n, false, err
}
