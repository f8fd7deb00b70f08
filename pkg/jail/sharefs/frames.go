package sharefs

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// The host end copies whole 9p messages between the guest and the server and answers
// two kinds of request itself. Extended attributes: the 9p library turns every getxattr
// error into EINVAL, which overlayfs and exec (security.capability) treat as fatal,
// while "no such attribute" (ENODATA) and "not supported" are what they expect from a
// share without extended attributes. Lock tests (Tgetlock), which the library does not
// know: locks are local to the guest (node.Lock), whose kernel checks its own locks
// before it asks, so the answer is always "unlocked". SQLite's WAL mode asks this of its
// -shm file and fails with an I/O error without an answer.

const (
	msgRlerror      = 7
	msgTxattrwalk   = 30
	msgTxattrcreate = 32
	msgTgetlock     = 54
	msgRgetlock     = 55
	lockTypeUnlock  = 2
	maxMessage      = 4 << 20
)

var errBadFrame = errors.New("sharefs: bad 9p message")

// frameConn serializes whole-message writes to the guest.
type frameConn struct {
	mu sync.Mutex
	c  net.Conn
}

func (f *frameConn) write(b []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, err := f.c.Write(b)
	return err
}

// readFrame reads one 9p message.
func readFrame(r io.Reader) ([]byte, error) {
	var hdr [7]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	size := binary.LittleEndian.Uint32(hdr[:4])
	if size < 7 || size > maxMessage {
		return nil, errBadFrame
	}
	b := make([]byte, size)
	copy(b, hdr[:])
	_, err := io.ReadFull(r, b[7:])
	return b, err
}

// rlerror is the reply to the request with tag in b carrying errno.
func rlerror(req []byte, errno unix.Errno) []byte {
	out := make([]byte, 11)
	binary.LittleEndian.PutUint32(out, 11)
	out[4] = msgRlerror
	copy(out[5:7], req[5:7])
	binary.LittleEndian.PutUint32(out[7:], uint32(errno))
	return out
}

// xattrwalkAnswer refuses a Txattrwalk: a listing (an empty name) is not supported,
// which overlayfs takes as "nothing to copy up" (any other error fails its copy-up of a
// file from a lower share); nor is the trusted namespace, which the guest kernel then
// stops asking about (overlayfs asks for trusted.overlay.origin on every directory it
// looks up); any other named attribute does not exist.
func xattrwalkAnswer(req []byte) []byte {
	// Txattrwalk: size[4] type[1] tag[2] fid[4] newfid[4] name[2+n].
	const fixed = 7 + 4 + 4 + 2
	if len(req) == fixed && binary.LittleEndian.Uint16(req[fixed-2:]) == 0 {
		return rlerror(req, unix.EOPNOTSUPP)
	}
	if name := req[min(fixed, len(req)):]; bytes.HasPrefix(name, []byte("trusted.")) {
		return rlerror(req, unix.EOPNOTSUPP)
	}
	return rlerror(req, unix.ENODATA)
}

// rgetlock answers a Tgetlock: the same range, owner and client, unlocked. A malformed
// request gets EINVAL.
func rgetlock(req []byte) []byte {
	// Tgetlock: size[4] type[1] tag[2] fid[4] locktype[1] start[8] length[8] proc_id[4]
	// client_id[2+n]; Rgetlock is the same without the fid.
	const fixed = 7 + 4 + 1 + 8 + 8 + 4 + 2
	if len(req) < fixed || len(req) != fixed+int(binary.LittleEndian.Uint16(req[fixed-2:])) {
		return rlerror(req, unix.EINVAL)
	}
	out := make([]byte, len(req)-4)
	copy(out[4:7], req[4:7])
	out[4] = msgRgetlock
	copy(out[7:], req[11:])
	out[7] = lockTypeUnlock
	binary.LittleEndian.PutUint32(out, uint32(len(out)))
	return out
}

// splice copies messages both ways until one side ends, then closes both.
func splice(guest, server net.Conn) {
	g := &frameConn{c: guest}
	var once sync.Once
	stop := func() { guest.Close(); server.Close() }
	var wg sync.WaitGroup
	wg.Go(func() {
		defer once.Do(stop)
		for {
			b, err := readFrame(guest)
			if err != nil {
				return
			}
			switch b[4] {
			case msgTxattrwalk:
				err = g.write(xattrwalkAnswer(b))
			case msgTxattrcreate:
				err = g.write(rlerror(b, unix.EOPNOTSUPP))
			case msgTgetlock:
				err = g.write(rgetlock(b))
			default:
				_, err = server.Write(b)
			}
			if err != nil {
				return
			}
		}
	})
	wg.Go(func() {
		defer once.Do(stop)
		for {
			b, err := readFrame(server)
			if err != nil {
				return
			}
			if g.write(b) != nil {
				return
			}
		}
	})
	wg.Wait()
}
