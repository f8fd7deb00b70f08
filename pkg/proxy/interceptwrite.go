package proxy

import (
	"mime"
	"net/http"
)

// batchSize is how much of a scrubbed body of known length is gathered
// before it is written: the upstream's TLS records arrive 16 KiB at a time,
// and writing each as a chunk of its own costs the client side two TLS
// records and two writes.
const batchSize = 64 << 10

// writerKey carries the countingResponse of a request to modifyResponse.
type writerKey struct{}

// countingResponse counts body bytes written to the client. Once batch is
// set (a body of known length that is not an event stream), it gathers
// writes up to batchSize; the reverse proxy's periodic flush and the end
// of the request send what it holds.
type countingResponse struct {
	http.ResponseWriter
	n      int64
	failed bool
	batch  bool
	buf    []byte
}

func (c *countingResponse) Write(b []byte) (int, error) {
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
	c.buf = append(c.buf, b...)
	return len(b), nil
}

func (c *countingResponse) write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}

// drain writes what the batch holds.
func (c *countingResponse) drain() error {
	if len(c.buf) == 0 {
		return nil
	}
	_, err := c.write(c.buf)
	c.buf = c.buf[:0]
	return err
}

// FlushError sends the batch and flushes the client connection.
func (c *countingResponse) FlushError() error {
	if err := c.drain(); err != nil {
		return err
	}
	return http.NewResponseController(c.ResponseWriter).Flush()
}

func (c *countingResponse) Flush() { _ = c.FlushError() }

func (c *countingResponse) Unwrap() http.ResponseWriter { return c.ResponseWriter }

// eventStream reports a server-sent event stream, which is never batched.
func eventStream(resp *http.Response) bool {
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return mt == "text/event-stream"
}
