package nettest

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
)

// FreePort returns a TCP port free on host now, for a server that must be told
// its port before it starts or that restarts on the same one. It lies below
// the kernel's ephemeral range, so no other socket is given it between this
// check and the server's bind: a port from listening on :0 and closing can be
// handed to the next connection that is made.
func FreePort(t testing.TB, host string) int {
	t.Helper()
	hi := ephemeralLow()
	lo := hi / 2
	for range 200 {
		port := lo + rand.IntN(hi-lo)
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		return port
	}
	t.Fatalf("nettest: no free port on %s in [%d, %d)", host, lo, hi)
	return 0
}

// ephemeralLow is the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n >= 4096 {
				return n
			}
		}
	}
	return 32768
}
