package admin

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/proxy"
)

// TestPatchTakesEffectForNextConnect drives a real forward proxy: a CONNECT
// refused before a PATCH succeeds right after it, and is refused again after
// the entry is removed.
func TestPatchTakesEffectForNextConnect(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "upstream ok")
	}))
	t.Cleanup(upstream.Close)
	_, portStr, _ := net.SplitHostPort(upstream.Listener.Addr().String())
	port, _ := strconv.Atoi(portStr)

	reg := proxy.NewRegistry()
	px, err := proxy.New(proxy.Options{
		AllowCIDRs:  []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		Hosts:       map[string][]netip.Addr{"svc.test": {netip.MustParseAddr("127.0.0.1")}},
		DialTimeout: 2 * time.Second,
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go px.ServeForward(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		px.Shutdown(ctx)
	})
	ts := start(t, Options{Registry: reg, Secret: secret})

	connectOK := func() bool {
		t.Helper()
		return connectThrough(t, ln.Addr().String(), fmt.Sprintf("svc.test:%d", port))
	}

	if code := ts.do(t, "POST", "/v1/register", secret, `{"ip":"127.0.0.1","id":"t","allowlist":["other.test"]}`, nil); code != 201 {
		t.Fatalf("register: %d", code)
	}
	if connectOK() {
		t.Fatal("CONNECT to svc.test allowed before the patch")
	}
	body := fmt.Sprintf(`{"add":["svc.test:%d"]}`, port)
	if code := ts.do(t, "PATCH", "/v1/clients/127.0.0.1", secret, body, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	if !connectOK() {
		t.Fatal("CONNECT to svc.test refused after the patch added it")
	}
	body = fmt.Sprintf(`{"remove":["svc.test:%d"]}`, port)
	if code := ts.do(t, "PATCH", "/v1/clients/127.0.0.1", secret, body, nil); code != 200 {
		t.Fatalf("patch remove: %d", code)
	}
	if connectOK() {
		t.Fatal("CONNECT to svc.test allowed after the patch removed it")
	}
}

// connectThrough opens a fresh connection to the proxy, sends CONNECT for
// target and, if the proxy says 200, fetches / through the tunnel.
func connectThrough(t *testing.T, proxyAddr, target string) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", proxyAddr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatalf("CONNECT %s: %v", target, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false
	}
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("GET through tunnel: %v", err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if string(body) != "upstream ok" {
		t.Fatalf("tunnel reached %q, want the upstream", body)
	}
	return true
}
