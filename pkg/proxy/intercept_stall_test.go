package proxy

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// stallClient is a guest's HTTP client for intercepted downloads it then
// stops reading. Its receive buffers are small, so the proxy's writes block
// soon and the client's own memory stays out of the figures.
func stallClient(t *testing.T, tp *testProxy, roots *tls.Config, h2 bool) *http.Transport {
	proxyURL, _ := urlParse("http://" + tp.addr)
	tr := &http.Transport{
		Proxy:             http.ProxyURL(proxyURL),
		TLSClientConfig:   roots,
		ForceAttemptHTTP2: h2,
		HTTP2:             &http.HTTP2Config{MaxReceiveBufferPerStream: 64 << 10, MaxReceiveBufferPerConnection: 1 << 20},
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
			if err == nil {
				c.(*net.TCPConn).SetReadBuffer(32 << 10)
			}
			return c, err
		},
	}
	if !h2 {
		tr.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	t.Cleanup(tr.CloseIdleConnections)
	return tr
}

// startStalled starts n downloads of 64 MiB and reads none of them.
func startStalled(t *testing.T, tr *http.Transport, port, n int) []*http.Response {
	var resps []*http.Response
	t.Cleanup(func() {
		for _, r := range resps {
			r.Body.Close()
		}
	})
	for i := range n {
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/big?n=%d", port, i), nil)
		resp, err := tr.RoundTrip(req)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("download %d: %v %v", i, resp, err)
		}
		resps = append(resps, resp)
	}
	return resps
}

// readAll reads a stalled download to its end.
func readAll(t *testing.T, r *http.Response) {
	t.Helper()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		k, err := r.Body.Read(buf)
		n += int64(k)
		if err != nil {
			break
		}
	}
	if n != 64<<20 {
		t.Fatalf("%d bytes after the stall, want %d", n, 64<<20)
	}
}

// A guest that opens as many intercepted HTTP/1 downloads as it may and
// then stops reading pins no more than its client's buffer budget in the
// proxy, instead of a batch and a cork (about half a MiB) per connection;
// one connection more is refused with 503. Every download still goes on
// once the guest reads again.
func TestInterceptStalledReadersBounded(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, _ := injectProxy(t, u)
	go func() {
		for range tp.decisions {
		}
	}()
	tr := stallClient(t, tp, &tls.Config{RootCAs: set.CA().Pool()}, false)
	base := heapInUse()
	resps := startStalled(t, tr, u.port, clientIntercepts)
	held := settledHeap(t)
	t.Logf("heap in use: %d MiB idle, %d MiB with %d stalled downloads", base>>20, held>>20, clientIntercepts)
	// Unbounded, the connections pinned 25 MiB. The budget holds clientBufs
	// half-MiB buffers (4 MiB); the rest, about a quarter MiB a connection,
	// is the TLS, HTTP and scrubber state of the client, the proxy and the
	// upstream, all in this process: 14 MiB in all.
	if limit := uint64(20 << 20); held > base+limit {
		t.Fatalf("%d stalled downloads hold %d MiB of heap above idle, want under %d MiB", clientIntercepts, (held-base)>>20, limit>>20)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("https://api.example.com:%d/small", u.port), nil)
	resp, err := tr.RoundTrip(req)
	if err != nil || resp.StatusCode != 503 || resp.Header.Get(ErrorHeader) != ReasonTooManyConns {
		t.Fatalf("connection %d: %v %v, want 503 %s", clientIntercepts+1, resp, err, ReasonTooManyConns)
	}
	resp.Body.Close()
	// The first download held one of the client's buffers, the last was
	// written unbatched.
	readAll(t, resps[0])
	readAll(t, resps[len(resps)-1])
}

// HTTP/2 streams the guest stops reading pin at most the upstream receive
// window of their connection, not Go's default of 4 MiB a stream (139 MiB for
// these 32), and one the guest reads again is not starved by the others.
func TestInterceptStalledStreamsBounded(t *testing.T) {
	u := startSecretUpstream(t)
	tp, set, _ := injectProxy(t, u)
	go func() {
		for range tp.decisions {
		}
	}()
	tr := stallClient(t, tp, &tls.Config{RootCAs: set.CA().Pool()}, true)
	base := heapInUse()
	const streams = 32
	resps := startStalled(t, tr, u.port, streams)
	if resps[0].ProtoMajor != 2 {
		t.Fatalf("guest spoke %s, want HTTP/2", resps[0].Proto)
	}
	held := settledHeap(t)
	t.Logf("heap in use: %d MiB idle, %d MiB with %d stalled streams", base>>20, held>>20, streams)
	if limit := uint64(48 << 20); held > base+limit {
		t.Fatalf("%d stalled streams hold %d MiB of heap above idle, want under %d MiB", streams, (held-base)>>20, limit>>20)
	}
	readAll(t, resps[0])
	readAll(t, resps[streams-1])
}

// heapInUse is the heap after two collections: the second empties the pools'
// victim caches.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// settledHeap waits until the heap has stayed within a quarter MiB for a
// second: every stalled write blocked.
func settledHeap(t *testing.T) uint64 {
	t.Helper()
	ref, since := heapInUse(), time.Now()
	last := ref
	eventually.True(t, 90*time.Second, "the heap settles", func() bool {
		last = heapInUse()
		if last < ref+256<<10 && ref < last+256<<10 {
			return time.Since(since) >= time.Second
		}
		ref, since = last, time.Now()
		return false
	})
	return last
}
