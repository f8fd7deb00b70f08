package control

import (
	"bufio"
	"encoding/binary"
	"io"
)

// Frame layout of yamux (spec.md in hashicorp/yamux): a 12-byte header of version,
// type, flags, stream id and length; only data frames carry length bytes after it.
const (
	frameHeader = 12
	typeData    = 0
	typePing    = 2
	flagSYN     = 1
)

// dropPings removes the guest's ping requests from what the host's yamux reads. yamux
// answers each ping from a goroutine of its own that waits up to ConnectionWriteTimeout
// for a send loop a guest that stops reading has stalled, so 12 bytes from the guest
// would buy a goroutine on the host. The host never needs a guest's ping answered:
// keep-alive is off and liveness comes from QEMU.
func dropPings(rwc io.ReadWriteCloser) io.ReadWriteCloser {
	// Buffered, so a frame's header is not a read of its own on the channel.
	return &pingFilter{ReadWriteCloser: rwc, r: bufio.NewReaderSize(rwc, 64<<10)}
}

type pingFilter struct {
	io.ReadWriteCloser
	r       *bufio.Reader
	hdr     [frameHeader]byte
	pending []byte // the current frame's header, not yet read by yamux
	data    uint32 // payload bytes of the current data frame not yet read by yamux
}

func (f *pingFilter) Read(p []byte) (int, error) {
	for {
		if len(f.pending) > 0 {
			n := copy(p, f.pending)
			f.pending = f.pending[n:]
			return n, nil
		}
		if f.data > 0 {
			if uint32(len(p)) > f.data {
				p = p[:f.data]
			}
			n, err := f.r.Read(p)
			f.data -= uint32(n)
			return n, err
		}
		if _, err := io.ReadFull(f.r, f.hdr[:]); err != nil {
			return 0, err
		}
		typ, flags := f.hdr[1], binary.BigEndian.Uint16(f.hdr[2:4])
		if typ == typePing && flags&flagSYN != 0 {
			continue
		}
		if typ == typeData {
			f.data = binary.BigEndian.Uint32(f.hdr[8:12])
		}
		f.pending = f.hdr[:]
	}
}
