package proxy

import (
	"mime"
	"net/http"
	"net/netip"
	"sync"
)

// batchSize is how much of a scrubbed body of known length is gathered
// before it is written: the upstream's TLS records arrive 16 KiB at a time,
// and writing each as a chunk of its own costs the client side two TLS
// records and two writes. 256 KiB moved a download with less CPU per byte
// than 64 or 128 KiB (see BENCHMARKS.md).
const batchSize = 256 << 10

// batchBufs holds batch buffers between batches, so that a connection
// holds one only while a batch is being gathered.
var batchBufs = sync.Pool{New: func() any { b := make([]byte, 0, batchSize); return &b }}

// writerKey carries the countingResponse of a request to modifyResponse.
type writerKey struct{}

// countingResponse counts body bytes written to the client. Once batch is
// set (a body of known length that is not an event stream), it gathers
// writes up to batchSize; the reverse proxy's periodic flush and the end
// of the request send what it holds. Batching and corking both need one
// of the client's buffers; without one a write goes straight through.
type countingResponse struct {
	http.ResponseWriter
	n      int64
	failed bool
	batch  bool
	buf    []byte
	cork   *corkConn // held around each write and flush, when set
	budget *clientCount
	src    netip.Addr
	owns   bool // holds one of src's buffers
}

func (c *countingResponse) Write(b []byte) (int, error) {
	defer c.settle()
	if !c.batch {
		return c.write(b)
	}
	if len(c.buf)+len(b) > batchSize {
		if err := c.drain(); err != nil {
			return 0, err
		}
	}
	if len(b) >= batchSize {
		return c.write(b)
	}
	if c.buf == nil {
		if !c.take() {
			return c.write(b)
		}
		c.buf = (*batchBufs.Get().(*[]byte))[:0]
	}
	c.buf = append(c.buf, b...)
	return len(b), nil
}

func (c *countingResponse) write(b []byte) (int, error) {
	corked := c.hold()
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	if rerr := c.release(corked); err == nil && rerr != nil {
		return 0, rerr
	}
	return n, err
}

// take reserves one of the client's buffers for this response, unless it
// holds one already.
func (c *countingResponse) take() bool {
	if !c.owns && c.budget != nil {
		c.owns = c.budget.take(c.src, clientBufs)
	}
	return c.owns || c.budget == nil
}

// settle gives the client's buffer back once no batch is gathering.
func (c *countingResponse) settle() {
	if c.owns && c.buf == nil {
		c.budget.give(c.src)
		c.owns = false
	}
}

// hold corks the connection when a buffer can be had for it.
func (c *countingResponse) hold() bool {
	if c.cork == nil || !c.take() {
		return false
	}
	c.cork.hold()
	return true
}

func (c *countingResponse) release(corked bool) error {
	if !corked {
		return nil
	}
	return c.cork.release()
}

// drain writes what the batch holds.
func (c *countingResponse) drain() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.write(c.buf)
	b := c.buf[:0]
	batchBufs.Put(&b)
	c.buf = nil
	return err
}

// FlushError sends the batch and flushes the client connection.
func (c *countingResponse) FlushError() error {
	defer c.settle()
	corked := c.hold()
	err := c.drain()
	if err == nil {
		err = http.NewResponseController(c.ResponseWriter).Flush()
	}
	if rerr := c.release(corked); err == nil {
		err = rerr
	}
	return err
}

func (c *countingResponse) Flush() { _ = c.FlushError() }

func (c *countingResponse) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// eventStream reports a server-sent event stream, which is never batched.
func eventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}
