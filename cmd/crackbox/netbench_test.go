package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// benchBytes is what the throughput benchmark moves through the proxy.
const benchBytes = 32 << 20

// BenchmarkRunNet: wall time of `crackbox run -- true` per network mode, boot and
// teardown included (tap: tap, nftables table, proxy and DNS up and down).
func BenchmarkRunNet(b *testing.B) {
	for _, mode := range []string{"none", "proxy-only", "tap"} {
		b.Run(mode, func(b *testing.B) {
			jailtest.Require(b)
			args := []string{"--net", mode, "--no-workdir", "-q"}
			if mode != "none" {
				args = append(args, "--allow", "x.invalid")
			}
			release, err := jailtest.Acquire(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			defer release()
			for b.Loop() {
				cmd := benchCmd(b, append(args, "--", "true")...)
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("crackbox run --net %s: %v\n%s", mode, err, out)
				}
			}
		})
	}
}

// BenchmarkTunnelGuestVsHost: a 32 MiB HTTP download through the jail's proxy by curl
// inside a tap-mode guest, against the same download through the same proxy code on
// the host alone. Reports both rates and their ratio.
func BenchmarkTunnelGuestVsHost(b *testing.B) {
	jailtest.Require(b)
	u := startUpstreams(b)
	cfg := writeRunConfig(b, u)

	hostRate := hostProxyRate(b, u)
	release, err := jailtest.Acquire(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	defer release()
	var guestRate float64
	for b.Loop() {
		cmd := benchCmd(b, "--config", cfg, "--net", "tap", "--no-workdir", "-q", "--allow", "good.test", "--",
			"curl", "-sS", "-o", "/dev/null", "-w", "%{speed_download}", fmt.Sprintf("http://good.test/big?n=%d", benchBytes))
		out, err := cmd.Output()
		if err != nil {
			b.Fatalf("guest curl: %v %s", err, out)
		}
		r, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("curl speed %q: %v", out, err)
		}
		guestRate = r / (1 << 20)
	}
	b.ReportMetric(hostRate, "host-MiB/s")
	b.ReportMetric(guestRate, "guest-MiB/s")
	b.ReportMetric(guestRate/hostRate, "guest/host")
}

// hostProxyRate downloads benchBytes through an in-process proxy on loopback and
// returns MiB/s: the proxy alone, no guest.
func hostProxyRate(b *testing.B, u *upstreams) float64 {
	list, _ := allow.Parse([]string{"good.test"})
	reg := proxy.NewRegistry()
	if err := reg.Register(proxy.Client{ID: "bench", IP: netip.MustParseAddr("127.0.0.1"), Allow: list}); err != nil {
		b.Fatal(err)
	}
	p, err := proxy.New(proxy.Options{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix(u.ip + "/32")},
		Hosts:      map[string][]netip.Addr{"good.test": {netip.MustParseAddr(u.ip)}},
	}, reg)
	if err != nil {
		b.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	go p.ServeForward(ln)
	defer p.Shutdown(context.Background())
	purl, _ := url.Parse("http://" + ln.Addr().String())
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(purl)}}
	best := 0.0
	for range 3 {
		start := time.Now()
		resp, err := c.Get(fmt.Sprintf("http://good.test/big?n=%d", benchBytes))
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != benchBytes {
			b.Fatalf("host download: %d bytes", n)
		}
		best = max(best, float64(n)/(1<<20)/time.Since(start).Seconds())
	}
	return best
}

// benchCmd is `crackbox run` with the test kernel and guest-init.
func benchCmd(b *testing.B, args ...string) *exec.Cmd {
	e := jailtest.Require(b)
	cmd := exec.Command(crackboxBin(b), append([]string{"run"}, args...)...)
	cmd.Dir = b.TempDir()
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"),
		"CRACKBOX_KERNEL=" + e.Kernel, "CRACKBOX_GUEST_INIT=" + e.GuestInit, "CRACKBOX_RUNS_DIR=" + b.TempDir()}
	return cmd
}
