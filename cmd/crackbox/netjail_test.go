package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/vishvananda/netlink"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
)

// requireTap stops the test through testreq unless this process may build tap networks.
func requireTap(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots guests; skipped in -short")
	}
	testreq.Check(t, netjail.Available(), "tap networking",
		"run as root on a host with /dev/net/tun (modprobe tun)")
}

// netRun prepares `crackbox run` with its own record dir.
func netRun(t *testing.T, ctx context.Context, dir, runsDir string, args ...string) *exec.Cmd {
	cmd := cliCmd(t, ctx, dir, args...)
	cmd.Env = append(cmd.Env, "CRACKBOX_RUNS_DIR="+runsDir)
	return cmd
}

// startAdmin starts `crackbox proxy serve` whose admin API listens on every host
// address (with a secret); the guest must not reach it. It returns the admin port.
func startAdmin(t *testing.T) int {
	t.Helper()
	port := freePort(t)
	cfg := filepath.Join(t.TempDir(), "proxy.toml")
	body := fmt.Sprintf("[proxy]\nlisten = \"127.0.0.1:0\"\ntransparent = \"\"\n[admin]\nlisten = \"0.0.0.0:%d\"\nsecret = \"s3cret\"\n", port)
	if err := os.WriteFile(cfg, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	d := startDaemon(t, crackboxBin(t), cleanEnv(t), "--config", cfg)
	d.waitLine(t, `msg="proxy serving"`, 1)
	t.Cleanup(func() { d.cmd.Process.Signal(syscall.SIGTERM) })
	return port
}

// blocked reports whether a probe result means the packet never reached a listener:
// a drop shows as a timeout, a missing route as an errno. "refused" would mean the
// host's stack saw the packet.
func blocked(r string) bool {
	return r == "timeout" || r == "noreply" || strings.HasPrefix(r, "errno")
}

// recordID returns the one run id recorded in runsDir.
func recordID(t *testing.T, runsDir string) string {
	t.Helper()
	ents, _ := os.ReadDir(runsDir)
	for _, e := range ents {
		if e.IsDir() {
			return e.Name()
		}
	}
	t.Fatalf("no run record in %s", runsDir)
	return ""
}

// leftovers names the tap, nft table and address claim of runID still present.
func leftovers(t *testing.T, runID string) []string {
	t.Helper()
	var out []string
	if _, err := netlink.LinkByName(netjail.TapName(runID)); err == nil {
		out = append(out, "tap "+netjail.TapName(runID))
	}
	if c, err := nftables.New(); err == nil {
		tables, _ := c.ListTables()
		for _, tb := range tables {
			if tb.Name == netjail.TableName(runID) {
				out = append(out, "table "+tb.Name)
			}
		}
	}
	claims, _ := filepath.Glob(filepath.Join(netjail.DefaultRunsDir(), ".netjail", "*.claim"))
	for _, c := range claims {
		if b, _ := os.ReadFile(c); bytes.Contains(b, []byte(netjail.TapName(runID))) {
			out = append(out, "claim "+c)
		}
	}
	return out
}

// children returns the pids whose parent is pid.
func children(pid int) []int {
	var out []int
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		b, err := os.ReadFile(s)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 && f[1] == strconv.Itoa(pid) {
			n, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
			out = append(out, n)
		}
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !bytes.Contains(b[bytes.LastIndexByte(b, ')'):], []byte(") Z"))
}

// TestNetjailTapGuests boots two tap-mode guests at once. Each probes every escape
// (other host ports and addresses, UDP, foreign DNS, ICMP, IPv6, the other guest and
// its tap) and serves ports for the other to try; the first then runs curl, wget,
// git clone and pip download through the jail's proxy, forward and transparent.
func TestNetjailTapGuests(t *testing.T) {
	jailtest.Require(t)
	requireTap(t)
	u := startUpstreams(t)
	cfg := writeRunConfig(t, u)
	baitTCP, baitUDP := hostBait(t)
	v4, v6 := hostAddrs()
	if v4 == "" {
		v4 = "192.0.2.254"
	}
	if v6 == "" {
		v6 = "2001:db8::254"
	}
	admin := startAdmin(t)
	wd := t.TempDir()
	os.Chmod(wd, 0o777)
	os.WriteFile(filepath.Join(wd, "probe.py"), []byte(probePy), 0o644)
	os.WriteFile(filepath.Join(wd, "clients.sh"), []byte(clientsSh), 0o644)
	logFile := filepath.Join(t.TempDir(), "decisions.jsonl")
	runsA, runsB := t.TempDir(), t.TempDir()

	slot(t)
	slot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	// The guests publish their addresses to each other in the workdir, so it is live.
	probeArgs := func(role, peer string) string {
		return fmt.Sprintf("python3 probe.py %s %s %s %s %d %d %d", role, peer, v4, v6, baitTCP, baitUDP, admin)
	}
	a := netRun(t, ctx, wd, runsA, "--config", cfg, "--root", "--net", "tap", "--timeout", "7m", "--workdir-sync", "live",
		"-v", u.caDir+":/cbxca:ro", "--log", logFile, "--allow", "good.test,git.test", "--allow", "pypi.test", "--",
		"sh", "-c", probeArgs("A", "B")+fmt.Sprintf(" && sh clients.sh /cbxca/ca.pem %s %d", v4, admin))
	b := netRun(t, ctx, wd, runsB, "--config", cfg, "--root", "--net", "tap", "--timeout", "7m", "--workdir-sync", "live",
		"--allow", "good.test", "--", "sh", "-c", probeArgs("B", "A"))
	var aOut, aErr, bOut, bErr bytes.Buffer
	a.Stdout, a.Stderr, b.Stdout, b.Stderr = &aOut, &aErr, &bOut, &bErr
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	aCode, bCode := exitCode(a.Wait()), exitCode(b.Wait())
	t.Logf("guest A exit %d stderr:\n%s\nstdout:\n%s", aCode, aErr.String(), aOut.String())
	t.Logf("guest B exit %d stderr:\n%s\nstdout:\n%s", bCode, bErr.String(), bOut.String())
	if aCode != 0 || bCode != 0 {
		t.Fatalf("exit A=%d B=%d, want 0", aCode, bCode)
	}

	connected := func(r string) bool { return r == "connected" }
	exact := func(want string) func(string) bool { return func(r string) bool { return r == want } }
	probeWant := map[string]func(string) bool{
		"tcp_own_proxy": connected, "tcp_own_dns": connected,
		"tcp_gw_bait": blocked, "tcp_gw_admin": blocked, "tcp_gw_ssh": blocked,
		"tcp_host_bait": blocked, "tcp_host_admin": blocked,
		"udp_gw_bait": blocked, "udp_host_bait": blocked, "udp_gw_nondns": blocked,
		"dns_allowed": exact("rcode0 " + u.ip), "dns_unlisted": exact("rcode3"), "dns_any": exact("rcode5"),
		"dns_via_host": blocked, "dns_via_public": blocked, "dns_peer_gw": blocked,
		"gai_allowed": exact("ok " + u.ip), "gai_unlisted": exact("gaierror-2"),
		"tcp6_host": blocked, "tcp6_gw_linklocal": blocked,
		"ping_gw": exact("reply"), "ping_host": blocked, "ping_peer_gw": blocked, "ping_peer_guest": blocked,
		"tcp_peer_proxy": blocked, "tcp_peer_guest": blocked, "udp_peer_guest": blocked,
		"peer_addr": exact("found"), // else the peer probes would try 0.0.0.0, the guest itself
	}
	for role, out := range map[string]string{"A": aOut.String(), "B": bOut.String()} {
		got := parseChecks(out)
		for name, ok := range probeWant {
			r, found := got[name]
			if !found {
				t.Errorf("guest %s: no CHECK %s", role, name)
			} else if !ok(r) {
				t.Errorf("guest %s: %s = %q", role, name, r)
			}
		}
	}

	not := func(bad string) func(string) bool { return func(r string) bool { return r != bad && r != "" } }
	hello := "hello good.test"
	clientWant := map[string]func(string) bool{
		"fwd_http": exact("200"), "fwd_https": exact("200"), "fwd_body": exact(hello),
		"fwd_unlisted": exact("403 hdr=1"), "fwd_unlisted_tls": exact("403"), "fwd_bad_port": exact("403"),
		"fwd_ip_literal": exact("403"), "fwd_admin_loopback": exact("403"),
		"trans_http": exact("200"), "trans_https": exact("200"),
		"trans_unlisted_http": func(r string) bool { return !strings.HasPrefix(r, "2") && r != "" },
		"trans_unlisted_tls":  exact("000"),
		"trans_forged_host":   func(r string) bool { return !strings.HasPrefix(r, "2") && r != "" },
		"trans_forged_ip":     exact(hello), // the proxy dials the name, never the guest's chosen address
		"trans_bad_port":      exact("000"),
		"wget_http":           exact(hello), "wget_https": exact(hello), "wget_unlisted": not("rc=0"),
		"git_clone": exact(gitMarker), "pip_download": exact(wheelName),
	}
	got := parseChecks(aOut.String())
	for name, ok := range clientWant {
		if r, found := got[name]; !found {
			t.Errorf("guest A: no CHECK %s", name)
		} else if !ok(r) {
			t.Errorf("guest A: %s = %q", name, r)
		}
	}

	// The exit summary names what was blocked; the decision log and the record agree.
	if !regexp.MustCompile(`crackbox: blocked \d+ requests?: .*other\.test`).MatchString(aErr.String()) {
		t.Errorf("guest A stderr lacks the blocked summary naming other.test:\n%s", aErr.String())
	}
	checkDecisionLog(t, logFile)
	id := recordID(t, runsA)
	show := cliOut(t, runsA, "runs", "show", id[:12])
	for _, want := range []string{"network:", "tap", "git.test,good.test,pypi.test", "exit 0", "probe.py A B", "blocked:", "other.test"} {
		if !strings.Contains(show, want) {
			t.Errorf("runs show lacks %q:\n%s", want, show)
		}
	}
	if ls := cliOut(t, runsA, "runs", "ls"); !strings.Contains(ls, id) {
		t.Errorf("runs ls lacks %s:\n%s", id, ls)
	}
	for _, rd := range []string{runsA, runsB} {
		if l := leftovers(t, recordID(t, rd)); len(l) > 0 {
			t.Errorf("left behind after the run: %v", l)
		}
	}
}

// checkDecisionLog wants JSON lines with an allowed good.test and a blocked other.test.
func checkDecisionLog(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("--log file: %v", err)
	}
	var allowedGood, blockedOther bool
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var d map[string]any
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatalf("decision log line %q: %v", line, err)
		}
		host, _ := d["host"].(string)
		dec, _ := d["decision"].(string)
		allowedGood = allowedGood || (host == "good.test" && dec == "allow")
		blockedOther = blockedOther || (host == "other.test" && dec != "allow")
	}
	if !allowedGood || !blockedOther {
		t.Errorf("decision log: allowed good.test %v, blocked other.test %v:\n%s", allowedGood, blockedOther, b)
	}
}

// cliOut runs a crackbox subcommand that boots no guest and returns its stdout.
func cliOut(t *testing.T, runsDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command(crackboxBin(t), args...)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "CRACKBOX_RUNS_DIR=" + runsDir}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("crackbox %v: %v", args, err)
	}
	return string(out)
}

// TestNetjailKilledRunAndRootless kills a tap-mode run with SIGKILL, then runs the
// allowed/blocked pair in proxy-only mode (no NIC) and checks that this next run
// removed the dead run's tap, table and claim and that its QEMU is gone. A --learn
// run then prints the --allow list the command needed.
func TestNetjailKilledRunAndRootless(t *testing.T) {
	jailtest.Require(t)
	requireTap(t)
	u := startUpstreams(t)
	cfg := writeRunConfig(t, u)
	wd := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()

	// The victim: a tap-mode run killed while its command sleeps.
	runsC := t.TempDir()
	victim := netRun(t, ctx, wd, runsC, "--config", cfg, "--net", "tap", "--allow", "good.test", "--",
		"sh", "-c", "echo ready; sleep 300")
	out := &outputWatcher{}
	victim.Stdout, victim.Stderr = out, out
	rel, err := jailtest.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	release := sync.OnceFunc(rel)
	t.Cleanup(release)
	if err := victim.Start(); err != nil {
		release()
		t.Fatal(err)
	}
	t.Cleanup(func() { victim.Process.Kill() })
	out.wait(t, "ready", 3*time.Minute)
	id := recordID(t, runsC)
	qemus := children(victim.Process.Pid)
	if len(leftovers(t, id)) < 3 || len(qemus) == 0 {
		t.Fatalf("victim run %s: objects %v, qemu %v; want tap, table, claim and qemu", id, leftovers(t, id), qemus)
	}
	victim.Process.Kill()
	victim.Wait()
	// QEMU dies by its parent-death signal; let it go before the slot does.
	eventually.True(t, time.Minute, "the victim's QEMU exits", func() bool {
		for _, pid := range qemus {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
			if err != nil {
				continue
			}
			if f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:])); len(f) > 0 && f[0] != "Z" {
				return false
			}
		}
		return true
	})
	release()
	if l := leftovers(t, id); len(l) < 2 {
		t.Fatalf("after SIGKILL only %v remain: the test would prove nothing", l)
	}

	// The next run, rootless mode: proxy-aware clients get through, nothing else routes.
	runsD := t.TempDir()
	script := `CA=$1; code() { curl -sS -m 30 -o /dev/null -w '%{http_code}' "$@" 2>/dev/null; }
echo "CHECK routes $(tail -n +2 /proc/net/route | wc -l) $(grep -vc ' lo$' /proc/net/ipv6_route)"
echo "CHECK fwd_http $(code http://good.test/)"
echo "CHECK fwd_https $(code --cacert $CA https://good.test/)"
h=$(curl -sS -m 30 -D - -o /dev/null http://other.test/ 2>/dev/null | tr -d '\r')
echo "CHECK fwd_unlisted $(echo "$h" | head -1 | cut -d' ' -f2) hdr=$(echo "$h" | grep -ci '^x-crackbox-error:')"
echo "CHECK direct $(code -m 5 --noproxy '*' --resolve good.test:80:203.0.113.10 http://good.test/)"`
	d := netRun(t, ctx, wd, runsD, "--config", cfg, "--net", "proxy-only", "-v", u.caDir+":/cbxca:ro",
		"--allow", "good.test", "--", "sh", "-c", script, "sh", "/cbxca/ca.pem")
	var dOut, dErr bytes.Buffer
	d.Stdout, d.Stderr = &dOut, &dErr
	slot(t)
	if code := exitCode(d.Run()); code != 0 {
		t.Fatalf("proxy-only run: exit %d\nstdout:\n%s\nstderr:\n%s", code, dOut.String(), dErr.String())
	}
	got := parseChecks(dOut.String())
	for name, want := range map[string]string{
		"routes": "0 0", "fwd_http": "200", "fwd_https": "200", "fwd_unlisted": "403 hdr=1", "direct": "000",
	} {
		if got[name] != want {
			t.Errorf("proxy-only: %s = %q, want %q", name, got[name], want)
		}
	}
	if !strings.Contains(dErr.String(), "crackbox: blocked 1 request: other.test (1)") {
		t.Errorf("proxy-only stderr lacks the summary:\n%s", dErr.String())
	}
	if show := cliOut(t, runsD, "runs", "show", recordID(t, runsD)); !strings.Contains(show, "proxy-only") {
		t.Errorf("runs show lacks the mode:\n%s", show)
	}
	if l := leftovers(t, id); len(l) > 0 {
		t.Errorf("the next run left the killed run's %v", l)
	}
	for _, pid := range qemus {
		if alive(pid) {
			t.Errorf("qemu %d of the killed run still runs", pid)
		}
	}
	if ls := cliOut(t, runsC, "runs", "ls"); !strings.Contains(ls, "lost") {
		t.Errorf("runs ls does not show the killed run as lost:\n%s", ls)
	}

	// --learn allows nothing and, even with -q, prints what to allow.
	e := netRun(t, ctx, wd, t.TempDir(), "--config", cfg, "--net", "proxy-only", "--learn", "-q", "--",
		"sh", "-c", "curl -s -m 20 http://good.test/; curl -s -m 20 http://pypi.test/; echo")
	var eErr bytes.Buffer
	e.Stderr = &eErr
	if code := exitCode(e.Run()); code != 0 {
		t.Fatalf("learn run: exit %d stderr %s", code, eErr.String())
	}
	if !strings.Contains(eErr.String(), "--allow good.test,pypi.test") {
		t.Errorf("learn output lacks the --allow list:\n%s", eErr.String())
	}
}

// TestNetjailCleanupOnFailure: a tap-mode run whose QEMU dies, one that hits
// --timeout, and one stopped with SIGTERM while its command ignores it all end with
// status 125 (or 143) and leave no tap, table or claim behind.
func TestNetjailCleanupOnFailure(t *testing.T) {
	jailtest.Require(t)
	requireTap(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel) // the subtests run in parallel after this function returns
	cases := []struct {
		name   string
		args   []string
		act    func(t *testing.T, cmd *exec.Cmd)
		status int
		stderr string
	}{
		{"qemu crash", []string{"--", "sh", "-c", "echo ready; sleep 300"}, func(t *testing.T, cmd *exec.Cmd) {
			for _, pid := range children(cmd.Process.Pid) {
				if b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); strings.HasPrefix(string(b), "qemu") {
					syscall.Kill(pid, syscall.SIGKILL)
					return
				}
			}
			t.Errorf("no qemu child of crackbox %d", cmd.Process.Pid)
		}, 125, "guest crashed"},
		{"timeout", []string{"--timeout", "20s", "--", "sh", "-c", "echo ready; sleep 300"}, nil, 125, "timeout"},
		{"sigterm ignored", []string{"--", "sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"}, func(t *testing.T, cmd *exec.Cmd) {
			cmd.Process.Signal(syscall.SIGTERM)
		}, 143, "ignored SIGTERM"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			runs := t.TempDir()
			cmd := netRun(t, ctx, t.TempDir(), runs, append([]string{"--net", "tap", "--allow", "none.invalid"}, c.args...)...)
			out := &outputWatcher{}
			cmd.Stdout, cmd.Stderr = out, out
			slot(t)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			out.wait(t, "ready", 3*time.Minute)
			id := recordID(t, runs)
			if l := leftovers(t, id); len(l) < 3 {
				t.Fatalf("running: only %v", l)
			}
			if c.act != nil {
				c.act(t, cmd)
			}
			code := exitCode(cmd.Wait())
			if code != c.status || !strings.Contains(out.String(), c.stderr) {
				t.Errorf("exit %d, want %d with %q; output:\n%s", code, c.status, c.stderr, out.String())
			}
			if l := leftovers(t, id); len(l) > 0 {
				t.Errorf("left behind: %v", l)
			}
			// A crash keeps its report, named in the error; it is the test's to remove.
			if m := consoleLogRE.FindStringSubmatch(out.String()); c.stderr == "guest crashed" {
				if m == nil {
					t.Fatalf("the crash names no console log:\n%s", out.String())
				}
				if _, err := os.Stat(m[1]); err != nil {
					t.Errorf("crash report: %v", err)
				}
				os.RemoveAll(filepath.Dir(m[1]))
			}
		})
	}
}

// consoleLogRE finds the console log a crash error names.
var consoleLogRE = regexp.MustCompile(`console log: (/\S+/console\.log)\)`)
