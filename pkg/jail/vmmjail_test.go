package jail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/testreq"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The main goroutine keeps the main thread until probeJailThreads, which TestMain runs
// before any test, so the probe knows the main thread is free when it waits.
func init() { runtime.LockOSThread() }

// jailThreadsOnMain counts the probe's lockedOffMain calls whose function ran on the
// main thread.
var jailThreadsOnMain = -1

// probeJailThreads calls lockedOffMain with the main thread idle, as crackbox's CLI does
// when its main goroutine waits for a run; the new goroutine is then most often run on
// the main thread itself.
func probeJailThreads() {
	runtime.UnlockOSThread()
	jailThreadsOnMain = 0
	for range 20 {
		tid := make(chan int)
		lockedOffMain(func() { tid <- unix.Gettid() })
		if <-tid == unix.Getpid() {
			jailThreadsOnMain++
		}
	}
}

// TestJailThreadNeverMain: the thread QEMU is forked from is never the main thread, which
// the runtime parks instead of ending, so the jail's mounts, no_new_privs and cgroup would
// stay with the process's leader after the run.
func TestJailThreadNeverMain(t *testing.T) {
	if jailThreadsOnMain != 0 {
		t.Fatalf("%d of 20 jail threads were the main thread (-1: TestMain did not probe)", jailThreadsOnMain)
	}
}

// The helper below is this test binary started through the VMM launcher exactly as QEMU
// is (vmmJail.command), with its own arguments instead of QEMU's.
const jailHelperArg = "vmmjail-helper"

func init() {
	if len(os.Args) >= 3 && os.Args[1] == jailHelperArg {
		jailHelper(os.Args[2], os.Args[3:])
		os.Exit(0)
	}
}

// jailView is what the helper saw from inside the jail.
type jailView struct {
	DialErr  string   `json:"dial_err"`
	Pids     []string `json:"pids"`
	Self     string   `json:"self"`     // /proc/self, the helper's pid as /proc names it
	Pid      int      `json:"pid"`      // its pid in its own namespace
	KillErr  string   `json:"kill_err"` // signal 0 to a host process
	SecretOK bool     `json:"secret_ok"`
	RootList []string `json:"root_list"`
	EtcList  []string `json:"etc_list"`
	UID      int      `json:"uid"`
	Hostname string   `json:"hostname"`
	Cmdline  string   `json:"cmdline"` // /proc/cmdline as the helper reads it
}

func jailHelper(action string, args []string) {
	switch action {
	case "probe":
		var v jailView
		c, err := net.DialTimeout("tcp", args[0], 2*time.Second)
		if err == nil {
			c.Close()
		} else {
			v.DialErr = err.Error()
		}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				v.Pids = append(v.Pids, e.Name())
			}
		}
		v.Self, _ = os.Readlink("/proc/self")
		v.Pid = os.Getpid()
		if host, err := strconv.Atoi(args[2]); err == nil {
			if err := syscall.Kill(host, 0); err != nil {
				v.KillErr = err.Error()
			}
		}
		_, err = os.Stat(args[1])
		v.SecretOK = err == nil
		root, _ := os.ReadDir("/")
		for _, e := range root {
			v.RootList = append(v.RootList, e.Name())
		}
		etc, _ := os.ReadDir("/etc")
		for _, e := range etc {
			v.EtcList = append(v.EtcList, e.Name())
		}
		v.UID = os.Getuid()
		v.Hostname, _ = os.Hostname()
		cmdline, _ := os.ReadFile("/proc/cmdline")
		v.Cmdline = string(cmdline)
		json.NewEncoder(os.Stdout).Encode(v)
	case "oom":
		// Touch far more than the leaf allows; the leaf's OOM killer must end this.
		var keep [][]byte
		for range 64 {
			b := make([]byte, 16<<20)
			for i := 0; i < len(b); i += 4096 {
				b[i] = 1
			}
			keep = append(keep, b)
		}
		fmt.Println("allocated", len(keep)*16, "MiB")
	case "wait":
		time.Sleep(time.Minute) // the scenario: a process that lives until the test ends it
	case "claim":
		c, err := claimVMMUID(args[0])
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(c.UID)
		time.Sleep(time.Minute) // the scenario: hold the claim until the test ends this process
	}
}

// startHelper starts the helper through the jail as QEMU would be started for a run
// whose QEMU is id, in leaf.
func startHelper(t *testing.T, id *vmmIdentity, leaf *cgroupLeaf, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	j, err := newVMMJail(filepath.Join(t.TempDir(), "root"), id, leaf)
	if err != nil {
		t.Fatal(err)
	}
	j.bind(exe, false)
	cmd, err := j.command(exe, append([]string{jailHelperArg}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	release, err := j.start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(release)
	return cmd, &out, &errb
}

func requireRoot(t *testing.T) {
	testreq.Root(t, "the launcher drops to a vmm uid and makes cgroup leaves")
}

// claimForTest claims a vmm uid under a temp run-dir base for the test's life.
func claimForTest(t *testing.T) *vmmIdentity {
	c, err := claimVMMUID(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.release)
	return &vmmIdentity{UID: c.UID, GID: c.UID, PerRun: true}
}

func TestVMMJailConfines(t *testing.T) {
	requireRoot(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	secret := filepath.Join(t.TempDir(), "host-secret")
	if err := os.WriteFile(secret, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	id := claimForTest(t)
	cmd, out, errb := startHelper(t, id, nil, "probe", ln.Addr().String(), secret, strconv.Itoa(os.Getpid()))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("helper: %v: %s", err, errb)
	}
	var v jailView
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("helper output %q: %v (stderr %s)", out, err, errb)
	}
	if v.DialErr == "" {
		t.Errorf("the jailed helper connected to the host's loopback service %s", ln.Addr())
	}
	if len(v.Pids) != 1 || v.Pids[0] != v.Self {
		t.Errorf("the jailed helper sees pids %v in /proc, want only itself (%s)", v.Pids, v.Self)
	}
	if v.Pid != 1 {
		t.Errorf("the jailed helper is pid %d, want 1 of a pid namespace of its own", v.Pid)
	}
	if v.KillErr == "" {
		t.Errorf("the jailed helper could signal the host's pid %d", os.Getpid())
	}
	if v.SecretOK {
		t.Errorf("the jailed helper sees %s outside its view", secret)
	}
	// The view belongs to the thread QEMU was forked from, never to crackbox's others.
	if _, err := os.Stat(secret); err != nil {
		t.Errorf("crackbox itself lost the host's view after starting the jail: %v", err)
	}
	exe, _ := os.Executable()
	allowed := map[string]bool{"bin": true, "sbin": true, "lib": true, "lib32": true, "lib64": true, "libx32": true,
		"usr": true, "dev": true, "proc": true, "etc": true, strings.Split(exe, "/")[1]: true}
	for _, n := range v.RootList {
		if !allowed[n] {
			t.Errorf("the jailed helper's root holds /%s (all: %v)", n, v.RootList)
		}
	}
	if len(v.EtcList) != 1 || v.EtcList[0] != "ld.so.cache" {
		t.Errorf("the jailed helper's /etc holds %v, want only ld.so.cache", v.EtcList)
	}
	if v.UID != int(id.UID) {
		t.Errorf("helper ran as uid %d, want the claimed %d", v.UID, id.UID)
	}
	if host, _ := os.ReadFile("/proc/cmdline"); strings.TrimSpace(string(host)) == "" || v.Cmdline != "" {
		t.Errorf("the jailed helper reads %q as the kernel command line (the host's is %q), want nothing", v.Cmdline, host)
	}
}

// TestVMMJailEnvAndIdentity: seen from the host, the jailed process runs as the run's own
// uid, with no_new_privs and none of crackbox's environment.
func TestVMMJailEnvAndIdentity(t *testing.T) {
	requireRoot(t)
	t.Setenv("CRACKBOX_TEST_CANARY", "canary-"+strconv.Itoa(os.Getpid()))
	id := claimForTest(t)
	cmd, _, errb := startHelper(t, id, nil, "wait")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	pid := cmd.Process.Pid
	env := readEnviron(t, pid)
	if strings.Contains(env, "CANARY") || strings.Contains(env, "HOME=") {
		t.Errorf("/proc/%d/environ holds crackbox's environment: %q", pid, env)
	}
	st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if !strings.Contains(string(st), "NoNewPrivs:\t1") {
		t.Errorf("no_new_privs not set:\n%s", st)
	}
	if uid, _ := procUID(pid); uid != id.UID {
		t.Errorf("uid %d, want %d (stderr %s)", uid, id.UID, errb)
	}
}

// readEnviron waits until pid has exec'd the helper and returns its environ.
func readEnviron(t *testing.T, pid int) string {
	t.Helper()
	eventually.True(t, time.Minute, "pid "+strconv.Itoa(pid)+" execs the helper", func() bool {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		return err == nil && bytes.Contains(b, []byte(jailHelperArg))
	})
	env, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	return string(env)
}

func TestVMMJailOOMKilledInItsCgroup(t *testing.T) {
	requireRoot(t)
	if _, err := cgroupSupport(); err != nil {
		testreq.Check(t, err, "cgroup support", "mount a cgroup v2 (or v1 memory/pids) hierarchy")
	}
	leaf, err := newCgroupLeaf("test-"+strconv.Itoa(os.Getpid()), cgroupLimits{MemoryBytes: 64 << 20, PidsMax: 64, CPUWeight: 100})
	if err != nil {
		t.Fatal(err)
	}
	defer leaf.remove()
	cmd, out, errb := startHelper(t, claimForTest(t), leaf, "oom")
	err = cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("helper ended with %v, want SIGKILL from its cgroup's OOM killer (out %q, stderr %q)", err, out, errb)
	}
	if n := leaf.oomKills(); n < 1 {
		t.Fatalf("leaf counts %d OOM kills, want the helper's", n)
	}
}

// TestVMMConfinementDegradesVisibly: unprivileged, a run says in one warning line that
// QEMU has no jail and no cgroup, and gets no leaf.
func TestVMMConfinementDegradesVisibly(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	leaf, note := vmmConfinement("x", &plan{memMiB: 256, cpus: 1}, 1000)
	if note != nil {
		reportHostNotes(Spec{}, log, []HostNote{*note})
	}
	if leaf != nil {
		t.Fatal("an unprivileged run got a cgroup leaf")
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN") || !strings.Contains(lines[0], "cgroup") || !strings.Contains(lines[0], "namespaces") {
		t.Fatalf("want one warning naming the missing jail and cgroup, got:\n%s", buf.String())
	}
}

func TestVMMLimitsFollowTheRun(t *testing.T) {
	l := vmmLimits(1024, 4)
	if l.MemoryBytes != 1024<<20+vmmMemOverhead || l.CPUWeight != 400 || l.PidsMax != vmmPidsMax {
		t.Fatalf("limits %+v for --memory 1G --cpus 4", l)
	}
	if vmmLimits(512, 200).CPUWeight != 10000 {
		t.Fatal("cpu.weight must stay within 10000")
	}
}

// TestVMMJailClonesIntoV2Leaf: under cgroup v2 QEMU is cloned straight into its leaf
// (CLONE_INTO_CGROUP), so it never runs a moment outside it. The host here may be v1, so
// the test mounts the v2 hierarchy itself; a leaf there needs no controllers to hold a
// process.
func TestVMMJailClonesIntoV2Leaf(t *testing.T) {
	requireRoot(t)
	mnt := t.TempDir()
	if err := syscall.Mount("cgroup2", mnt, "cgroup2", 0, ""); err != nil {
		testreq.Check(t, err, "a cgroup2 mount", "a kernel with cgroup v2 (Linux 4.5 or later)")
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	name := "crackbox-test-v2-" + strconv.Itoa(os.Getpid())
	dir := filepath.Join(mnt, name)
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Rmdir(dir) })
	leaf := &cgroupLeaf{v2: true, dirs: map[string]string{"": dir}}
	cmd, _, errb := startHelper(t, claimForTest(t), leaf, "wait")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "0::/"+name+"\n") {
		t.Fatalf("the jailed helper's cgroups:\n%s\nwant the v2 leaf /%s (stderr %s)", b, name, errb)
	}
	procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if got := strings.Fields(string(procs)); len(got) != 1 || got[0] != strconv.Itoa(cmd.Process.Pid) {
		t.Fatalf("the leaf holds %v, want only the helper %d", got, cmd.Process.Pid)
	}
}

// TestVMMJailLeafHoldsOnlyQEMU: the run's leaf (v1 here: the forking thread joins it and
// leaves again) holds the jailed process and nothing of crackbox.
func TestVMMJailLeafHoldsOnlyQEMU(t *testing.T) {
	requireRoot(t)
	if _, err := cgroupSupport(); err != nil {
		testreq.Check(t, err, "cgroup support", "mount a cgroup v2 (or v1 memory/pids) hierarchy")
	}
	leaf, err := newCgroupLeaf("test-only-"+strconv.Itoa(os.Getpid()), vmmLimits(64, 1))
	if err != nil {
		t.Fatal(err)
	}
	defer leaf.remove()
	cmd, _, _ := startHelper(t, claimForTest(t), leaf, "wait")
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	want := strconv.Itoa(cmd.Process.Pid)
	for ctl, d := range leaf.dirs {
		// A thread of crackbox left behind shows in v1's tasks by its own id (and makes
		// cgroup.procs list crackbox). The forking thread leaves just after the start, so
		// give it a moment.
		var stray []string
		if !eventually.Within(10*time.Second, func() bool {
			stray = stray[:0]
			b, _ := os.ReadFile(filepath.Join(d, "tasks"))
			for _, tid := range strings.Fields(string(b)) {
				if _, err := os.Stat("/proc/self/task/" + tid); err == nil {
					stray = append(stray, tid)
				}
			}
			return len(stray) == 0
		}) {
			t.Errorf("leaf %q still holds crackbox's threads %v", ctl, stray)
		}
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		if got := strings.Fields(string(b)); len(got) != 1 || got[0] != want {
			t.Errorf("leaf %q holds %v, want only the helper %s (crackbox is %d)", ctl, got, want, os.Getpid())
		}
	}
}

// TestVMMJailQEMUOutsideUsr: a QEMU installed under its own prefix and reached through a
// symlink starts in the jail with its prefix (libraries, firmware) in view.
func TestVMMJailQEMUOutsideUsr(t *testing.T) {
	requireRoot(t)
	top := t.TempDir()
	prefix := filepath.Join(top, "opt", "qemu")
	for _, d := range []string{"bin", "share"} {
		os.MkdirAll(filepath.Join(prefix, d), 0o755)
	}
	if err := os.WriteFile(filepath.Join(prefix, "share", "firmware"), []byte("firmware-here\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(prefix, "bin", "qemu-system-x86_64")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec cat \"${0%/bin/*}/share/firmware\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(top, "qemu")
	if err := os.Symlink(bin, link); err != nil {
		t.Fatal(err)
	}
	rd := &runDir{ID: "test", Dir: t.TempDir(), VM: t.TempDir()}
	cmd, j, err := qemuCommand(vmStart{qemu: link, vmm: claimForTest(t)}, vmConfig{}, rd, nil)
	if err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	release, err := startVMM(cmd, j)
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	if err := cmd.Wait(); err != nil || out.String() != "firmware-here\n" {
		t.Fatalf("jailed qemu from %s: %v, out %q, stderr %q", link, err, out.String(), errb.String())
	}
}
