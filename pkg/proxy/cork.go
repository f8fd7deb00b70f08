package proxy

import (
	"net"
	"sync"
)

// corkConn gathers what is written to it while held into one write to the
// connection. The TLS layer writes every record of a response batch on its
// own, and each write is a trip through the TCP stack of both ends; held
// around a batch, the records leave in one. Holds nest: only the outermost
// release writes.
type corkConn struct {
	net.Conn
	mu   sync.Mutex
	held int
	buf  []byte
}

// Write passes b on, or keeps it for release while held. The lock also
// covers the pass-through so that a release never overtakes a write.
func (c *corkConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		if c.buf == nil {
			c.buf = (*corkBufs.Get().(*[]byte))[:0]
		}
		c.buf = append(c.buf, b...)
		return len(b), nil
	}
	return c.Conn.Write(b)
}

func (c *corkConn) hold() {
	c.mu.Lock()
	c.held++
	c.mu.Unlock()
}

// release writes what was kept while held. An error is the connection's;
// the TLS layer above already counted those bytes as sent, so the caller
// must treat it as the end of the connection.
func (c *corkConn) release() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.held > 0 {
		c.held--
	}
	if c.held > 0 || len(c.buf) == 0 {
		return nil
	}
	_, err := c.Conn.Write(c.buf)
	b := c.buf[:0]
	corkBufs.Put(&b)
	c.buf = nil
	return err
}

// corkBufs holds the buffers of released corks: a connection holds one only
// while a write is held, at most one batch of the response and its TLS
// framing.
var corkBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchSize+batchSize/16); return &b }}
