package proxy

import (
	"bytes"
	"errors"
	"net"
	"net/http"
	"testing"
)

// writesConn records every Write it is given.
type writesConn struct {
	net.Conn
	writes [][]byte
	err    error
}

func (c *writesConn) Write(b []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	c.writes = append(c.writes, bytes.Clone(b))
	return len(b), nil
}

func TestCorkConnGathersHeldWrites(t *testing.T) {
	wc := &writesConn{}
	c := &corkConn{Conn: wc}
	c.Write([]byte("a"))
	if len(wc.writes) != 1 {
		t.Fatalf("a write while not held waited: %q", wc.writes)
	}
	c.hold()
	c.hold()
	c.Write([]byte("b"))
	c.Write([]byte("c"))
	if err := c.release(); err != nil || len(wc.writes) != 1 {
		t.Fatalf("an inner release wrote: %q %v", wc.writes, err)
	}
	c.Write([]byte("d"))
	if err := c.release(); err != nil {
		t.Fatal(err)
	}
	if len(wc.writes) != 2 || string(wc.writes[1]) != "bcd" {
		t.Fatalf("held writes did not leave as one: %q", wc.writes)
	}
	if err := c.release(); err != nil || len(wc.writes) != 2 {
		t.Fatalf("an empty release wrote: %q %v", wc.writes, err)
	}
	wc.err = errors.New("gone")
	c.hold()
	c.Write([]byte("e"))
	if err := c.release(); err == nil {
		t.Fatal("release hid the connection's error")
	}
}

// splitWriter writes each Write to the connection in two parts, as the
// HTTP/1 server does when a chunk outgrows its write buffer.
type splitWriter struct {
	http.ResponseWriter
	c *corkConn
}

func (w *splitWriter) Write(b []byte) (int, error) {
	h := len(b) / 2
	w.c.Write(b[:h])
	w.c.Write(b[h:])
	return len(b), nil
}

func (w *splitWriter) Flush() { w.c.Write([]byte("\r\n")) }

func TestCountingResponseCorksWritesAndFlushes(t *testing.T) {
	wc := &writesConn{}
	cork := &corkConn{Conn: wc}
	cw := &countingResponse{ResponseWriter: &splitWriter{c: cork}, batch: true, cork: cork}
	cw.Write(make([]byte, 1000))
	cw.Write(make([]byte, 1000))
	if err := cw.FlushError(); err != nil {
		t.Fatal(err)
	}
	if len(wc.writes) != 1 || len(wc.writes[0]) != 2002 {
		t.Fatalf("a flushed batch left in %d writes, want 1", len(wc.writes))
	}
	cw.batch = false
	cw.Write(make([]byte, 100))
	if len(wc.writes) != 2 || len(wc.writes[1]) != 100 || cw.n != 2100 {
		t.Fatalf("an unbatched write left in %d writes, want 1 more; counted %d", len(wc.writes)-1, cw.n)
	}
}

func TestCountingResponseHoldsNoBufferBetweenBatches(t *testing.T) {
	cork := &corkConn{Conn: &writesConn{}}
	cw := &countingResponse{ResponseWriter: &splitWriter{c: cork}, batch: true, cork: cork}
	cw.Write(make([]byte, 1000))
	if cw.buf == nil {
		t.Fatal("a batch being gathered holds no buffer")
	}
	if err := cw.FlushError(); err != nil {
		t.Fatal(err)
	}
	if cw.buf != nil || cork.buf != nil {
		t.Fatalf("a flushed response still holds buffers: batch %d, cork %d bytes", cap(cw.buf), cap(cork.buf))
	}
}
