package proxy

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"
)

// bigText is a repeating text pattern, shared by every big response.
var bigText = func() []byte {
	b := make([]byte, 256<<10)
	for i := range b {
		b[i] = "abcdefghijklmnopqrstuvwxyz0123456789\n"[i%37]
	}
	return b
}()

// serveBig writes n bytes of bigText.
func serveBig(w http.ResponseWriter, n int) {
	w.Header().Set("Content-Length", strconv.Itoa(n))
	buf := bigText
	for n > 0 {
		k := min(n, len(buf))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

// BenchmarkSecretInjection compares one HTTPS request, and a 64 MiB
// download, through an intercepted connection to a bound host with the same
// through a plain CONNECT tunnel to an unbound host, on one kept-alive
// HTTP/1.1 client connection each. Leaf certificates are cached after the
// first request. A download reports the CPU the whole process (client,
// proxy and upstream) spent per MiB, and how many cores it kept busy.
func BenchmarkSecretInjection(b *testing.B) {
	u := startSecretUpstream(b)
	tp, set, _ := injectProxy(b, u)
	go func() {
		for range tp.decisions {
		}
	}()
	modes := []struct {
		name, host string
		c          *http.Client
	}{
		{"tunnel", "other.example.com", guestClient(tp, u.pool, false)},
		{"intercept", "api.example.com", guestClient(tp, set.CA().Pool(), false)},
	}
	get := func(b *testing.B, c *http.Client, url string) int64 {
		resp, err := c.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("status %d err %v", resp.StatusCode, err)
		}
		return n
	}
	for _, m := range modes {
		b.Run("request/"+m.name, func(b *testing.B) {
			url := fmt.Sprintf("https://%s:%d/small", m.host, u.port)
			get(b, m.c, url) // connection and leaf certificate set up
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				start := time.Now()
				get(b, m.c, url)
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
		})
	}
	for _, m := range modes {
		b.Run("download64M/"+m.name, func(b *testing.B) {
			url := fmt.Sprintf("https://%s:%d/big", m.host, u.port)
			b.SetBytes(64 << 20)
			cpu0, wall0 := processCPU(), time.Now()
			for range b.N {
				if n := get(b, m.c, url); n != 64<<20 {
					b.Fatalf("got %d bytes", n)
				}
			}
			// CPU per MiB bounds the throughput on a saturated machine:
			// cores ÷ (CPU per MiB) MiB per second at best.
			cpu, wall := processCPU()-cpu0, time.Since(wall0)
			b.ReportMetric(float64(cpu.Microseconds())/1e3/float64(64*b.N), "cpu-ms/MiB")
			b.ReportMetric(cpu.Seconds()/wall.Seconds(), "cores")
		})
	}
}
