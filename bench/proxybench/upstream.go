package main

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
)

// Upstream commands: the first byte a client sends after its tunnel is up.
const (
	cmdDownload = 'D' // then 8-byte big-endian count: upstream sends that many bytes and closes
	cmdEcho     = 'E' // then 1-byte length and that many bytes: upstream echoes them and closes
	cmdHold     = 'H' // upstream answers one byte and keeps the connection open until released
)

// upstream is the benchmark's own TCP server on loopback. It closes first
// after a download or an echo so TIME_WAIT lands on its listening port and
// the proxies' ephemeral ports towards it stay free for the next phase.
type upstream struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	held map[net.Conn]struct{}
	fill []byte
}

func startUpstream(addr string) (*upstream, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	u := &upstream{ln: ln, held: map[net.Conn]struct{}{}, fill: make([]byte, 1<<20)}
	u.wg.Add(1)
	go u.accept()
	return u, nil
}

func (u *upstream) accept() {
	defer u.wg.Done()
	for {
		c, err := u.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue // EMFILE and friends: the client side reports the failure
		}
		go u.serve(c)
	}
}

func (u *upstream) serve(c net.Conn) {
	var cmd [1]byte
	if _, err := io.ReadFull(c, cmd[:]); err != nil {
		c.Close()
		return
	}
	switch cmd[0] {
	case cmdDownload:
		defer c.Close()
		var n [8]byte
		if _, err := io.ReadFull(c, n[:]); err != nil {
			return
		}
		left := int64(binary.BigEndian.Uint64(n[:]))
		for left > 0 {
			b := u.fill
			if int64(len(b)) > left {
				b = b[:left]
			}
			w, err := c.Write(b)
			if err != nil {
				return
			}
			left -= int64(w)
		}
	case cmdEcho:
		defer c.Close()
		var l [1]byte
		if _, err := io.ReadFull(c, l[:]); err != nil {
			return
		}
		buf := make([]byte, l[0])
		if _, err := io.ReadFull(c, buf); err != nil {
			return
		}
		c.Write(buf)
	case cmdHold:
		u.mu.Lock()
		u.held[c] = struct{}{}
		u.mu.Unlock()
		c.Write([]byte{'h'})
		// Block until release closes c or the peer goes away.
		io.Copy(io.Discard, c)
		u.mu.Lock()
		delete(u.held, c)
		u.mu.Unlock()
		c.Close()
	default:
		c.Close()
	}
}

// release closes every held connection from the upstream side.
func (u *upstream) release() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for c := range u.held {
		c.Close()
	}
}

func (u *upstream) close() {
	u.ln.Close()
	u.release()
	u.wg.Wait()
}
