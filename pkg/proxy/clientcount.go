package proxy

import (
	"net/netip"
	"sync"
)

// What one client's intercepted connections (hosts bound to a secret) may
// hold at once. Unlike a tunnel, which moves bytes through the kernel, an
// intercepted connection keeps buffers of the proxy's own, and a guest that
// opens many and stops reading them would pin those buffers: half a MiB per
// HTTP/1 response, and up to the HTTP/2 receive window per upstream stream.
const (
	// clientIntercepts bounds the intercepted connections of one client;
	// more get 503 too-many-connections.
	clientIntercepts = 32
	// clientBufs bounds the response buffers (a batch and the cork under
	// it, about half a MiB) of one client; a response that finds none free
	// is written as it is read, unbatched.
	clientBufs = 8
	// interceptStreams bounds the concurrent HTTP/2 streams of one
	// intercepted connection, each an upstream stream of its own.
	interceptStreams = 8
	// upstreamStreamWindow is the HTTP/2 receive window toward an upstream
	// per stream: what the proxy buffers of a response the guest does not
	// read. The connection's window fits every stream's, so streams the
	// guest stopped reading never starve one it reads.
	upstreamStreamWindow = 512 << 10
	upstreamConnWindow   = interceptStreams * upstreamStreamWindow
)

// clientCount counts something each client holds: accepted connections,
// intercepted connections, response buffers. The bound is the caller's, as
// the one on accepted connections changes on reload.
type clientCount struct {
	mu sync.Mutex
	n  map[netip.Addr]int
}

// take reserves one for src; false means src holds max already.
func (c *clientCount) take(src netip.Addr, max int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[src] >= max {
		return false
	}
	if c.n == nil {
		c.n = make(map[netip.Addr]int)
	}
	c.n[src]++
	return true
}

// give returns one of src's.
func (c *clientCount) give(src netip.Addr) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n[src]--; c.n[src] <= 0 {
		delete(c.n, src)
	}
}
