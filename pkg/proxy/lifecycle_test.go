package proxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// holdServer accepts TCP connections and echoes until they close.
func holdServer(t *testing.T) int {
	t.Helper()
	return portOf(t, nettest.Echo(t))
}

// openTunnel CONNECTs through the proxy and checks one echo round trip.
func openTunnel(t *testing.T, addr, target string) *rawConn {
	t.Helper()
	rc := dialProxy(t, addr)
	resp, _ := rc.do(t, "CONNECT", "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT %s: %d", target, resp.StatusCode)
	}
	io.WriteString(rc, "ping")
	b := make([]byte, 4)
	if _, err := io.ReadFull(rc.br, b); err != nil || string(b) != "ping" {
		t.Fatalf("echo: %q %v", b, err)
	}
	return rc
}

func TestShutdownWaitsThenCuts(t *testing.T) {
	port := holdServer(t)
	target := fmt.Sprintf("echo.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{target})
	tunnel := openTunnel(t, tp.addr, target)
	idle := dialProxy(t, tp.addr) // connected, no request yet
	// Wait until the proxy has accepted it: closing the listener resets a connection
	// still in the kernel's accept queue, which is not what this test is about.
	eventually.True(t, 10*time.Second, "the proxy holds the tunnel and the idle connection", func() bool {
		tp.mu.Lock()
		defer tp.mu.Unlock()
		return len(tp.conns) == 2
	})
	// The echo through the tunnel proves its relay runs, so it already counts.
	if tp.Active() != 1 {
		t.Fatalf("Active() = %d, want 1", tp.Active())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := tp.Shutdown(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Shutdown = %v, want deadline exceeded (a tunnel was open)", err)
	}
	if ctx.Err() == nil {
		t.Fatal("Shutdown returned before its deadline without waiting for the tunnel")
	}
	// Both the idle connection and the tunnel are gone.
	for name, c := range map[string]*rawConn{"idle": idle, "tunnel": tunnel} {
		c.SetReadDeadline(time.Now().Add(time.Minute))
		if _, err := io.ReadAll(c.br); err != nil {
			t.Errorf("%s connection not closed: %v", name, err)
		}
	}
	if tp.Active() != 0 {
		t.Fatalf("Active() = %d after shutdown", tp.Active())
	}
	if _, err := net.DialTimeout("tcp", tp.addr, time.Second); err == nil {
		t.Fatal("listener still accepting after Shutdown")
	}
}

func TestShutdownCleanWhenTunnelsEnd(t *testing.T) {
	port := holdServer(t)
	target := fmt.Sprintf("echo.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{target})
	tunnel := openTunnel(t, tp.addr, target)
	// End the tunnel once Shutdown has begun, so Shutdown is seen waiting for it.
	go func() {
		eventually.Within(time.Minute, func() bool {
			tp.mu.Lock()
			defer tp.mu.Unlock()
			return tp.shutdown
		})
		tunnel.Close()
	}()
	// Only a hang guard: Shutdown returns when the tunnel ends, however late that is.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := tp.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown = %v, want nil after the tunnel ended", err)
	}
}

// TestTunnelIdleTimeout: traffic keeps a tunnel open past the idle timeout, and silence
// ends it, never sooner than the timeout after the last byte. Every bound is measured
// from an instant that bounds the proxy's own last activity from below (a write of ours
// that it had to relay), so a stall of this machine can delay a close but never makes a
// correct proxy look wrong.
func TestTunnelIdleTimeout(t *testing.T) {
	const idle = 500 * time.Millisecond
	port := holdServer(t)
	target := fmt.Sprintf("echo.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8},
		IdleTimeout: idle}, []string{target})
	var rc *rawConn
	var last time.Time // before our latest write: the proxy saw activity after it
	for attempt := 0; rc == nil; attempt++ {
		if attempt == 10 {
			t.Fatal("no attempt kept a tunnel busy past the idle timeout without a stall of the idle timeout")
		}
		rc, last = busyTunnel(t, tp.addr, target, idle)
	}
	rc.SetReadDeadline(time.Now().Add(time.Minute)) // a hang guard only
	if _, err := io.ReadAll(rc.br); err != nil {
		t.Fatalf("idle tunnel not closed: %v", err)
	}
	if el := time.Since(last); el < idle {
		t.Fatalf("tunnel closed %v after its last activity, before the %v idle timeout", el, idle)
	}
}

// busyTunnel opens a tunnel and echoes a byte through it every idle/5 until it has lived
// twice the idle timeout. A close less than idle after our previous write is a proxy
// bug; a later one may be a stall here, and busyTunnel returns nil to try again.
func busyTunnel(t *testing.T, addr, target string, idle time.Duration) (*rawConn, time.Time) {
	t.Helper()
	rc := openTunnel(t, addr, target)
	opened, last := time.Now(), time.Now()
	for time.Since(opened) < 2*idle {
		time.Sleep(idle / 5) // the scenario: activity spaced within the idle timeout
		prev := last
		last = time.Now()
		io.WriteString(rc, "x")
		if _, err := io.ReadFull(rc.br, make([]byte, 1)); err != nil {
			if gap := time.Since(prev); gap < idle {
				t.Fatalf("tunnel closed %v after activity, within the %v idle timeout: %v", gap, idle, err)
			}
			rc.Close()
			t.Logf("tunnel closed after a %v stall; trying again", time.Since(prev))
			return nil, time.Time{}
		}
	}
	return rc, last
}

func TestRegistryUpdateAppliesToOpenConnection(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	a, b := fmt.Sprintf("a.test:%d", port), fmt.Sprintf("b.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("a.test", "b.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{a})
	rc := dialProxy(t, tp.addr)
	if resp, _ := rc.do(t, "GET", get(a, "/")); resp.StatusCode != 200 {
		t.Fatalf("a: %d", resp.StatusCode)
	}
	c, err := tp.reg.Update(netip.MustParseAddr("127.0.0.1"), []string{b}, []string{a})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Allow.Entries(); len(got) != 1 || got[0] != b {
		t.Fatalf("entries %q", got)
	}
	if resp, _ := rc.do(t, "GET", get(b, "/")); resp.StatusCode != 200 {
		t.Fatalf("b after PATCH: %d", resp.StatusCode)
	}
	resp, body := rc.do(t, "GET", get(a, "/"))
	expectRefusal(t, resp, body, 403, ReasonAllowlist)
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	l, _ := allow.Parse([]string{"x.example"})
	ip := netip.MustParseAddr("10.0.0.2")
	if err := r.Register(Client{ID: "b", IP: ip, Allow: l}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Client{ID: "c", IP: netip.MustParseAddr("::ffff:10.0.0.2")}); !errors.Is(err, ErrClientExists) {
		t.Fatalf("duplicate address: %v", err)
	}
	if err := r.Register(Client{ID: "a", IP: netip.MustParseAddr("10.0.0.1")}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(Client{ID: "z"}); !errors.Is(err, ErrInvalidClient) {
		t.Fatalf("no IP: %v", err)
	}
	if got := r.List(); len(got) != 2 || got[0].ID != "a" || got[1].ID != "b" {
		t.Fatalf("List = %+v", got)
	}
	if c, ok := r.Lookup(ip); !ok || c.ID != "b" {
		t.Fatalf("Lookup = %+v %v", c, ok)
	}
	if c, ok := r.Lookup(netip.MustParseAddr("10.0.0.1")); !ok || c.Allow.Check("x.example", 443) == nil {
		t.Fatalf("client without list must allow nothing: %+v %v", c, ok)
	}
	if _, err := r.Update(ip, []string{"*.com"}, nil); !errors.Is(err, allow.ErrInvalidEntry) {
		t.Fatalf("bad update: %v", err)
	}
	if _, err := r.Update(netip.MustParseAddr("10.9.9.9"), nil, nil); !errors.Is(err, ErrUnknownClient) {
		t.Fatalf("update unknown: %v", err)
	}
	if !r.Unregister(ip) || r.Unregister(ip) {
		t.Fatal("Unregister")
	}
	if _, ok := r.Lookup(ip); ok {
		t.Fatal("still registered")
	}
}

func TestServeForwardConnFixedClient(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	host := fmt.Sprintf("up.test:%d", port)
	tp := startProxy(t, Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}}, nil)
	l, _ := allow.Parse([]string{host})
	a, b := net.Pipe()
	done := make(chan struct{})
	go func() {
		tp.ServeForwardConn(b, Client{ID: "vm-7", Allow: l})
		close(done)
	}()
	rc := &rawConn{Conn: a, br: bufioReader(a)}
	resp, body := rc.do(t, "GET", get(host, "/pipe"))
	if resp.StatusCode != 200 || body != "hello from "+host+"/pipe" {
		t.Fatalf("got %d %q", resp.StatusCode, body)
	}
	resp, body = rc.do(t, "GET", get("other.test", "/"))
	expectRefusal(t, resp, body, 403, ReasonAllowlist)
	<-done
	if d := tp.next(t); d.ClientID != "vm-7" || !d.Allowed {
		t.Fatalf("decision %+v", d)
	}
}

func TestReloadSwapsHosts(t *testing.T) {
	srv := echoServer(t)
	port := portOf(t, srv.URL)
	host := fmt.Sprintf("up.test:%d", port)
	tp := startProxy(t, Options{Hosts: map[string][]netip.Addr{"up.test": {netip.MustParseAddr("10.0.0.1")}},
		AllowCIDRs: []netip.Prefix{loopback8}}, []string{host})
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", get(host, "/"))
	expectRefusal(t, resp, body, 403, ReasonPrivateAddress)
	if err := tp.Reload(Options{Hosts: hostsFor("up.test"), AllowCIDRs: []netip.Prefix{loopback8}}); err != nil {
		t.Fatal(err)
	}
	rc = dialProxy(t, tp.addr)
	if resp, _ := rc.do(t, "GET", get(host, "/")); resp.StatusCode != 200 {
		t.Fatalf("after reload: %d", resp.StatusCode)
	}
	if err := tp.Reload(Options{DefaultPorts: []int{0}}); err == nil {
		t.Fatal("Reload accepted port 0")
	}
}

func TestDefaultPortsOption(t *testing.T) {
	port := holdServer(t)
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8},
		DefaultPorts: []int{port}}, []string{"echo.test"})
	openTunnel(t, tp.addr, fmt.Sprintf("echo.test:%d", port))
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "CONNECT", "CONNECT echo.test:443 HTTP/1.1\r\nHost: echo.test:443\r\n\r\n")
	expectRefusal(t, resp, body, 403, ReasonPort)
}

func TestMetrics(t *testing.T) {
	port := holdServer(t)
	target := fmt.Sprintf("echo.test:%d", port)
	reg := prometheus.NewRegistry()
	tp := startProxy(t, Options{Hosts: hostsFor("echo.test"), AllowCIDRs: []netip.Prefix{loopback8}, Registerer: reg},
		[]string{target})
	rc := openTunnel(t, tp.addr, target)
	if v := gauge(t, reg, "crackbox_proxy_active_tunnels", ""); v != 1 {
		t.Errorf("active_tunnels = %v", v)
	}
	rc.Close()
	tp.next(t)
	rc = dialProxy(t, tp.addr)
	rc.do(t, "GET", get("nope.test", "/"))
	tp.next(t)
	if v := gauge(t, reg, "crackbox_proxy_decisions_total", ReasonAllowlist); v != 1 {
		t.Errorf("decisions{blocked-by-allowlist} = %v", v)
	}
	if v := gauge(t, reg, "crackbox_proxy_decisions_total", "allowed"); v != 1 {
		t.Errorf("decisions{allowed} = %v", v)
	}
	if v := gauge(t, reg, "crackbox_proxy_bytes_total", "out"); v < 4 {
		t.Errorf("bytes out = %v", v)
	}
	if v := gauge(t, reg, "crackbox_proxy_dial_duration_seconds", ""); v != 1 {
		t.Errorf("dial observations = %v", v)
	}
	// A second proxy on the same registerer shares the collectors.
	if _, err := New(Options{Registerer: reg}, NewRegistry()); err != nil {
		t.Fatal(err)
	}
}

// gauge returns a metric value (histogram: sample count) whose only label,
// if any, has value label.
func gauge(t *testing.T, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) == 0 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

// TestTunnelHalfClose: the client shuts down its write side, the upstream
// reads to EOF and only then answers; the answer must still arrive.
func TestTunnelHalfClose(t *testing.T) {
	target := fmt.Sprintf("sink.test:%d", portOf(t, nettest.Server(t, countingServer)))
	tp := startProxy(t, Options{Hosts: hostsFor("sink.test"), AllowCIDRs: []netip.Prefix{loopback8}}, []string{target})
	rc := dialProxy(t, tp.addr)
	if resp, _ := rc.do(t, "CONNECT", "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n"); resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %d", resp.StatusCode)
	}
	io.WriteString(rc, "0123456789")
	if err := rc.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(rc.br)
	if err != nil || string(b) != "got 10 bytes" {
		t.Fatalf("answer after half-close: %q %v", b, err)
	}
	if d := tp.next(t); d.BytesOut != 10 || d.BytesIn != int64(len("HTTP/1.1 200 Connection established\r\n\r\n")+len("got 10 bytes")) {
		t.Fatalf("byte counts %+v", d)
	}
}
