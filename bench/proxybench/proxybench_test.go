package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
)

func TestTargetFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want target
		err  bool
	}{
		{in: "direct", want: target{Name: "direct"}},
		{in: "squid=127.0.0.1:3128,pid=42", want: target{Name: "squid", Proxy: "127.0.0.1:3128", Host: "127.0.0.1", PID: 42}},
		{in: "cb=127.0.0.1:1,pid=7,host=up.test", want: target{Name: "cb", Proxy: "127.0.0.1:1", Host: "up.test", PID: 7}},
		{in: "old=127.0.0.1:1,pid=7,baseline", want: target{Name: "old", Proxy: "127.0.0.1:1", Host: "127.0.0.1", PID: 7, Baseline: true}},
		{in: "cb=127.0.0.1:1", err: true},              // no pid
		{in: "cb=127.0.0.1:1,pid=x", err: true},        // bad pid
		{in: "cb=127.0.0.1:1,pid=1,port=2", err: true}, // unknown option
		{in: "direct=127.0.0.1:1,pid=1", err: true},    // reserved name
		{in: "=127.0.0.1:1,pid=1", err: true},
	} {
		var f targetFlags
		err := f.Set(tc.in)
		if tc.err {
			if err == nil {
				t.Errorf("Set(%q) = nil error, want one", tc.in)
			}
			continue
		}
		if err != nil || len(f) != 1 || f[0] != tc.want {
			t.Errorf("Set(%q) = %+v, %v; want %+v", tc.in, f, err, tc.want)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i))
	}
	if got := percentile(ds, 50); got != 50 {
		t.Errorf("p50 = %d, want 50", got)
	}
	if got := percentile(ds, 99); got != 99 {
		t.Errorf("p99 = %d, want 99", got)
	}
	if got := median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("median of 3 = %v, want 2", got)
	}
	if got := median([]time.Duration{4, 1, 3, 2}); got != 2 {
		t.Errorf("median of 4 = %v, want 2 (integer mean of 2 and 3)", got)
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %d, want 0", got)
	}
}

// connectProxy is a minimal CONNECT relay that refuses every host but allow.
func connectProxy(t *testing.T, allow string) string {
	return nettest.Server(t, func(c net.Conn) {
		defer c.Close()
		req, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			return
		}
		host, port, _ := net.SplitHostPort(req.Host)
		if req.Method != http.MethodConnect || host != allow {
			io.WriteString(c, "HTTP/1.1 403 Forbidden\r\nX-Crackbox-Error: blocked-by-allowlist\r\n\r\n")
			return
		}
		up, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", port))
		if err != nil {
			io.WriteString(c, "HTTP/1.1 502 Bad Gateway\r\n\r\n")
			return
		}
		defer up.Close()
		io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n")
		go func() { io.Copy(up, c); up.(*net.TCPConn).CloseWrite() }()
		io.Copy(c, up)
	})
}

func TestPhasesAgainstRealSockets(t *testing.T) {
	up, err := startUpstream("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.close()
	addr := up.ln.Addr().String()
	px := connectProxy(t, "up.test")
	b := &bench{upstream: addr, up: up, opTimeout: 5 * time.Second, concurrency: 4}
	direct := &result{Target: target{Name: "direct"}}
	proxied := &result{Target: target{Name: "relay", Proxy: px, Host: "up.test", PID: os.Getpid()}}

	b.checkDeny(proxied, "other.test")
	if !proxied.DenyChecked {
		t.Fatalf("deny check did not pass: %v", proxied.Errors)
	}
	loose := &result{Target: target{Name: "loose", Proxy: px, Host: "up.test", PID: os.Getpid()}}
	b.checkDeny(loose, "up.test")
	if loose.DenyChecked || len(loose.Errors) == 0 {
		t.Error("a proxy that lets the name through passed the deny check")
	}
	if _, err := open(proxied.Target, addr, time.Now().Add(time.Second)); err != nil {
		t.Fatalf("open through relay: %v", err)
	}
	_, err = open(target{Name: "x", Proxy: px, Host: "no.test", PID: 1}, addr, time.Now().Add(time.Second))
	if !errors.Is(err, errRefused) {
		t.Errorf("refused CONNECT error = %v, want errRefused", err)
	}

	rs := []*result{direct, proxied}
	for _, r := range rs {
		b.throughput(r, 8<<20)
		var acc rateAcc
		b.rate(r, 40, &acc)
		r.setRate(&acc)
	}
	b.sequential(rs, 20)
	b.idle(proxied, 50, 10*time.Millisecond)
	for _, r := range rs {
		if len(r.Errors) > 0 {
			t.Errorf("%s: %v", r.Target.Name, r.Errors)
		}
		if r.ThroughputMiBs <= 0 || r.RateTunnels != 40 || r.RatePerSec <= 0 || r.SeqP99 <= 0 {
			t.Errorf("%s: incomplete result %+v", r.Target.Name, r)
		}
	}
	if proxied.IdleOpened != 50 || proxied.RSSIdleMiB <= 0 || proxied.IdleFDs < 100 {
		t.Errorf("idle: opened %d, rss %.1f MiB, fds %d", proxied.IdleOpened, proxied.RSSIdleMiB, proxied.IdleFDs)
	}
	vs := verdicts(rs, "relay", 50)
	if len(vs) != 3 { // no other proxy, so no rate verdict
		t.Errorf("verdicts = %+v, want throughput, latency and RSS", vs)
	}
}
