package guest

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/control"
)

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	bin, data, sub := filepath.Join(dir, "bin"), filepath.Join(dir, "data"), filepath.Join(dir, "sub")
	for _, d := range []string{bin, data, sub, filepath.Join(bin, "isdir")} {
		os.MkdirAll(d, 0o755)
	}
	os.WriteFile(filepath.Join(bin, "tool"), []byte("#!/bin/sh\n"), 0o755)
	os.WriteFile(filepath.Join(data, "tool"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(data, "only-data"), []byte("x"), 0o644)
	cases := []struct {
		name, argv0, path string
		want              string
		err               error
	}{
		{"found in PATH", "tool", bin, filepath.Join(bin, "tool"), nil},
		{"first executable wins over earlier data file", "tool", data + ":" + bin, filepath.Join(bin, "tool"), nil},
		{"only a data file", "only-data", data + ":" + bin, "", ErrNotExecutable},
		{"missing", "nope", bin, "", ErrNotFound},
		{"directory is not executable", "isdir", bin, "", ErrNotExecutable},
		{"slash path bypasses PATH", filepath.Join(bin, "tool"), "", filepath.Join(bin, "tool"), nil},
		{"slash path missing", filepath.Join(sub, "x"), bin, "", ErrNotFound},
		{"empty", "", bin, "", ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := lookPath(tc.argv0, []string{"HOME=/", "PATH=" + tc.path})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("lookPath = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestLookPathUsesCommandEnvNotOurs(t *testing.T) {
	// "sh" is on our PATH but the command's PATH has nothing.
	if _, err := lookPath("sh", []string{"PATH=" + t.TempDir()}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v: the lookup leaked guest-init's own PATH", err)
	}
}

func TestCommandEnv(t *testing.T) {
	rs := &control.RunSpec{Env: []string{"PATH=/bin", "HTTP_PROXY=http://old", "KEEP=1"}}
	if got := CommandEnv(rs); !slices.Equal(got, rs.Env) {
		t.Fatalf("no proxy: env %v, want unchanged %v", got, rs.Env)
	}
	rs.Net.ProxyURL = "http://10.0.0.1:3128"
	got := CommandEnv(rs)
	want := map[string]string{
		"PATH": "/bin", "KEEP": "1", "HTTP_PROXY": rs.Net.ProxyURL, "HTTPS_PROXY": rs.Net.ProxyURL,
		"https_proxy": rs.Net.ProxyURL, "ALL_PROXY": rs.Net.ProxyURL, "NO_PROXY": "localhost,127.0.0.1",
		"npm_config_https_proxy": rs.Net.ProxyURL, "PIP_PROXY": rs.Net.ProxyURL,
	}
	seen := map[string]int{}
	for _, kv := range got {
		k, v, _ := strings.Cut(kv, "=")
		seen[k]++
		if w, ok := want[k]; ok && w != v {
			t.Errorf("%s=%s, want %s", k, v, w)
		}
	}
	for k := range want {
		if seen[k] != 1 {
			t.Errorf("%s appears %d times, want once", k, seen[k])
		}
	}
}

// TestReaperKeepsCommandStatus runs the reaper in a child process made a subreaper, so
// orphans re-parent to it as they would to PID 1, without disturbing this test binary.
func TestReaperKeepsCommandStatus(t *testing.T) {
	if os.Getenv("CRACKBOX_REAPER_HELPER") == "1" {
		reaperHelper()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReaperKeepsCommandStatus$")
	cmd.Env = append(os.Environ(), "CRACKBOX_REAPER_HELPER=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "status=7 zombies=0") {
		t.Fatalf("helper output %q, want the command's status 7 and no zombies", out)
	}
}

func reaperHelper() {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		println("prctl:", err.Error())
		os.Exit(1)
	}
	r := StartReaper()
	rs := &control.RunSpec{
		// Orphans that exit before and after the command, re-parented to us.
		Argv: []string{"sh", "-c", "(true &); (sleep 0.2 &); exit 7"},
		Env:  []string{"PATH=" + os.Getenv("PATH")}, UID: os.Getuid(), GID: os.Getgid(),
	}
	p, err := start(rs, rs.Env, r)
	if err != nil {
		println("start:", err.Error())
		os.Exit(1)
	}
	ws := <-p.done
	// Wait until every orphan has exited and been reaped; a zombie still here at the
	// deadline is one the reaper failed to collect (it reaps within milliseconds, so the
	// deadline only bounds the failing case).
	var zombies int
	eventually.Within(time.Minute, func() bool {
		var live int
		live, zombies = ourChildren()
		return live+zombies == 0
	})
	var probe syscall.WaitStatus
	if pid, _ := syscall.Wait4(-1, &probe, syscall.WNOHANG, nil); pid > 0 {
		zombies++
	}
	println("status=" + strconv.Itoa(exitOf(ws).Code) + " zombies=" + strconv.Itoa(zombies))
	os.Exit(0)
}

// ourChildren counts this process's children that are running and that are zombies.
func ourChildren() (live, zombies int) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(os.Getpid()) {
			if f[0] == "Z" {
				zombies++
			} else {
				live++
			}
		}
	}
	return live, zombies
}

func TestLookPathSkipsUnsearchableDirs(t *testing.T) {
	if testreq.AsNobody(t) { // root can search any directory
		return
	}
	locked := filepath.Join(t.TempDir(), "locked")
	os.MkdirAll(locked, 0o000)
	if _, err := lookPath("crackbox-nope", []string{"PATH=" + locked + ":/usr/bin"}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound (a shell reports 127 here)", err)
	}
	if p, err := lookPath("sh", []string{"PATH=" + locked + ":/bin:/usr/bin"}); err != nil {
		t.Fatalf("sh behind an unsearchable dir: %q, %v", p, err)
	}
}

func TestCommandEnvTrustCA(t *testing.T) {
	rs := &control.RunSpec{Env: []string{"SSL_CERT_FILE=/host/ca.pem", "KEEP=1"}}
	rs.Net.TrustCA = "-----BEGIN CERTIFICATE-----\n"
	got := map[string]string{}
	for _, kv := range CommandEnv(rs) {
		k, v, _ := strings.Cut(kv, "=")
		if _, dup := got[k]; dup {
			t.Fatalf("%s set twice", k)
		}
		got[k] = v
	}
	for _, k := range TrustEnv {
		if got[k] != TrustBundle {
			t.Errorf("%s = %q, want %q", k, got[k], TrustBundle)
		}
	}
	if got["KEEP"] != "1" || got["HTTP_PROXY"] != "" {
		t.Fatalf("env %v", got)
	}
}
