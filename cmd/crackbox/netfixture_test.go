package main

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/internal/testreq"
)

// upstreams are the test's own origin servers: plain HTTP on ip:80 and TLS on ip:443
// (a test CA signs good.test, other.test, git.test and pypi.test). ip is a random
// loopback address, reached only by the run's proxy through [proxy] hosts.
type upstreams struct {
	ip     string
	caFile string // PEM, in caDir
	caDir  string
}

const (
	gitMarker = "crackbox-git-ok"
	wheelName = "tinypkg-0.1-py3-none-any.whl"
)

var upstreamNames = []string{"good.test", "other.test", "git.test", "pypi.test"}

func startUpstreams(t testing.TB) *upstreams {
	t.Helper()
	u := &upstreams{caDir: t.TempDir()}
	// A random 127.x.y.1 keeps parallel test processes off each other's port 80/443.
	u.ip = fmt.Sprintf("127.%d.%d.1", 100+mrand.IntN(150), 1+mrand.IntN(250))
	caPEM, cert := testCA(t, upstreamNames)
	u.caFile = filepath.Join(u.caDir, "ca.pem")
	if err := os.WriteFile(u.caFile, caPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chmod(u.caDir, 0o755)

	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/big" {
			serveBig(w, r)
			return
		}
		host, _, _ := strings.Cut(r.Host, ":")
		fmt.Fprintf(w, "hello %s", host)
	})
	git := gitBackend(t)
	index := pipIndex(t)
	tlsMux := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := strings.Cut(r.Host, ":")
		switch host {
		case "git.test":
			git.ServeHTTP(w, r)
		case "pypi.test":
			index.ServeHTTP(w, r)
		default:
			hello(w, r)
		}
	})
	serve := func(port string, h http.Handler, tlsCfg *tls.Config) {
		ln, err := net.Listen("tcp", net.JoinHostPort(u.ip, port))
		if err != nil {
			t.Fatalf("upstream listen %s:%s: %v", u.ip, port, err)
		}
		nettest.ServeHTTP(t, ln, h, tlsCfg)
	}
	serve("80", hello, nil)
	serve("443", tlsMux, &tls.Config{Certificates: []tls.Certificate{cert}})
	return u
}

// serveBig writes ?n= bytes (default 32 MiB) for throughput measurements.
func serveBig(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("n"))
	if err != nil || n <= 0 {
		n = 32 << 20
	}
	w.Header().Set("Content-Length", strconv.Itoa(n))
	buf := make([]byte, 256<<10)
	for n > 0 {
		k := min(n, len(buf))
		if _, err := w.Write(buf[:k]); err != nil {
			return
		}
		n -= k
	}
}

// testCA makes a CA and a leaf certificate for names signed by it.
func testCA(t testing.TB, names []string) ([]byte, tls.Certificate) {
	c := nettest.NewCert(t, "crackbox test CA", names...)
	return c.CAPEM, c.Leaf
}

// gitBackend serves a bare repository holding one commit (README = gitMarker) with
// git http-backend behind net/http/cgi.
func gitBackend(t testing.TB) http.Handler {
	t.Helper()
	backend := "/usr/lib/git-core/git-http-backend"
	testreq.File(t, backend, "apt-get install git (make deps installs it)")
	dir := t.TempDir()
	work := filepath.Join(dir, "work")
	run := func(d string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = d
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir, "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(work, 0o755)
	run(work, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(work, "README"), []byte(gitMarker+"\n"), 0o644)
	run(work, "add", "README")
	run(work, "commit", "-q", "-m", "first")
	run(dir, "clone", "-q", "--bare", work, "repo.git")
	return &cgi.Handler{
		Path: backend,
		Root: "/",
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	}
}

// pipIndex is a PEP 503 simple index holding one tiny wheel built here.
func pipIndex(t testing.TB) http.Handler {
	t.Helper()
	var buf bytes.Buffer
	z := zip.NewWriter(&buf)
	files := []struct{ name, body string }{
		{"tinypkg/__init__.py", "VALUE = 1\n"},
		{"tinypkg-0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: tinypkg\nVersion: 0.1\n"},
		{"tinypkg-0.1.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: crackbox-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
		{"tinypkg-0.1.dist-info/RECORD", "tinypkg/__init__.py,,\ntinypkg-0.1.dist-info/METADATA,,\ntinypkg-0.1.dist-info/WHEEL,,\ntinypkg-0.1.dist-info/RECORD,,\n"},
	}
	for _, f := range files {
		w, err := z.Create(f.name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(f.body))
	}
	if err := z.Close(); err != nil {
		t.Fatal(err)
	}
	wheel := buf.Bytes()
	sum := sha256.Sum256(wheel)
	mux := http.NewServeMux()
	mux.HandleFunc("/simple/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `<!DOCTYPE html><html><body><a href="/simple/tinypkg/">tinypkg</a></body></html>`)
	})
	mux.HandleFunc("/simple/tinypkg/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `<!DOCTYPE html><html><body><a href="/files/%s#sha256=%s">%s</a></body></html>`,
			wheelName, hex.EncodeToString(sum[:]), wheelName)
	})
	mux.HandleFunc("/files/"+wheelName, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Write(wheel)
	})
	return mux
}

// writeRunConfig writes a crackbox.toml that sends the upstream names to u.ip and
// allows the proxy to dial that one loopback address.
func writeRunConfig(t testing.TB, u *upstreams) string {
	t.Helper()
	var hosts []string
	for _, n := range upstreamNames {
		hosts = append(hosts, fmt.Sprintf("%q = [%q]", n, u.ip))
	}
	body := fmt.Sprintf("[proxy]\nallow_cidrs = [%q]\nhosts = { %s }\n", u.ip+"/32", strings.Join(hosts, ", "))
	path := filepath.Join(t.TempDir(), "crackbox.toml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// hostBait listens on every host address: a TCP port that answers "bait" and a UDP
// port that echoes. The guest must reach neither.
func hostBait(t testing.TB) (tcpPort, udpPort int) {
	t.Helper()
	ln := nettest.Listen(t, ":0")
	nettest.Serve(ln, func(c net.Conn) {
		c.Write([]byte("bait\n"))
		c.Close()
	})
	pc, err := net.ListenPacket("udp4", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		b := make([]byte, 2048)
		for {
			n, a, err := pc.ReadFrom(b)
			if err != nil {
				return
			}
			pc.WriteTo(b[:n], a)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port, pc.LocalAddr().(*net.UDPAddr).Port
}

// hostAddrs returns one global IPv4 and one global IPv6 address of the host outside
// the jail pool ("" when there is none).
func hostAddrs() (v4, v6 string) {
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		if ip4 := ipn.IP.To4(); ip4 != nil {
			if v4 == "" && !(ip4[0] == 10 && ip4[1] == 213) {
				v4 = ip4.String()
			}
		} else if v6 == "" {
			v6 = ipn.IP.String()
		}
	}
	return v4, v6
}

// freePort returns a TCP port free on all addresses.
func freePort(t testing.TB) int { return nettest.FreePort(t, "0.0.0.0") }
