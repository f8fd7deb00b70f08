package sharefs

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"

	"golang.org/x/sys/unix"
)

// The host end copies whole 9p messages between the guest and the server and answers
// extended-attribute requests itself: the 9p library turns every getxattr error into
// EINVAL, which overlayfs and exec (security.capability) treat as fatal, while
// "no such attribute" (ENODATA) and "not supported" are what they expect from a share
// without extended attributes.

const (
	msgRlerror      = 7
	msgTxattrwalk   = 30
	msgTxattrcreate = 32
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
				err = g.write(rlerror(b, unix.ENODATA))
			case msgTxattrcreate:
				err = g.write(rlerror(b, unix.EOPNOTSUPP))
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
