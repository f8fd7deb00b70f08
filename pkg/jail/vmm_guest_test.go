package jail_test

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/host"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// qemuSeen is what the host can read about a running guest's QEMU.
type qemuSeen struct {
	pid     int
	uid     int
	environ string
	status  string
	pidNS   string
	ipcNS   string
	utsNS   string
	cgroup  string
	cmdline string // its /proc/cmdline, or the error reading it
}

// TestQEMUOwnUIDNoEnvJailed holds a vmm uid as a concurrent run does, then runs a guest
// blocked until the host has looked at its QEMU: QEMU runs as another uid of the vmm
// block, carries none of crackbox's environment (a canary), has no_new_privs, its own
// pid namespace and the run's cgroup leaf; afterwards its uid claim is gone.
func TestQEMUOwnUIDNoEnvJailed(t *testing.T) {
	jailtest.Require(t)
	canary := "canary-" + strconv.Itoa(os.Getpid())
	t.Setenv("CRACKBOX_TEST_CANARY", canary)
	held, release, err := jail.ClaimVMMUID(rundir.DefaultBase())
	if err != nil {
		t.Fatal(err)
	}
	defer release()

	r, w := io.Pipe()
	defer w.Close()
	s := jailtest.Spec(t, "sh", "-c", "read x; echo ok")
	// As plain root a work directory is served by a virtiofsd helper, checked below too.
	s.Workdir = t.TempDir()
	s.Stdin = r
	s.Env = []string{"GUEST_SECRET=" + canary}
	var out bytes.Buffer
	s.Stdout = &out
	started := make(chan struct{}, 1)
	s.Started = func(int) { started <- struct{}{} }
	done := make(chan error, 1)
	go func() {
		res, err := jailtest.Run(t, s)
		if err == nil && (res.Exit != 0 || !strings.Contains(out.String(), "ok")) {
			err = fmt.Errorf("exit %d, output %q", res.Exit, out.String())
		}
		done <- err
	}()
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("guest ended before it started: %v", err)
	}
	seen := qemuChildren(t, "qemu-system")
	var shareServers []qemuSeen
	for _, c := range qemuChildren(t, "") {
		if strings.HasPrefix(c.environ, "CRACKBOX_SHARE_SERVER=") {
			shareServers = append(shareServers, c)
		}
	}
	w.Close()
	if err := <-done; err != nil {
		t.Errorf("guest: %v", err)
	}
	if len(seen) != 1 {
		t.Fatalf("found %d QEMU children, want 1: %+v", len(seen), seen)
	}
	q := seen[0]
	selfNS, _ := os.Readlink("/proc/self/ns/pid")
	if q.uid < host.VMMUIDBase || q.uid >= host.VMMUIDBase+host.VMMUIDCount {
		t.Errorf("QEMU %d runs as uid %d, outside the vmm block", q.pid, q.uid)
	}
	if q.uid == int(held) {
		t.Errorf("QEMU runs as uid %d, which another run holds", held)
	}
	if strings.Contains(q.environ, canary) || strings.Contains(q.environ, "CRACKBOX_TEST_CANARY") {
		t.Errorf("QEMU %d's environ holds crackbox's environment: %q", q.pid, q.environ)
	}
	if !strings.Contains(q.status, "NoNewPrivs:\t1") {
		t.Errorf("QEMU %d lacks no_new_privs", q.pid)
	}
	if q.cmdline != "" {
		t.Errorf("QEMU %d reads %q as the kernel command line, want nothing", q.pid, q.cmdline)
	}
	if q.pidNS == selfNS {
		t.Errorf("QEMU %d shares crackbox's pid namespace %s", q.pid, selfNS)
	}
	if _, err := jail.CgroupSupport(); err == nil && !strings.Contains(q.cgroup, "crackbox.vmm/") {
		t.Errorf("QEMU %d is not in a run's cgroup leaf:\n%s", q.pid, q.cgroup)
	}
	// The work directory is served by a share server of its own (pkg/jail/sharefs), which gets
	// only its own configuration as environment.
	if len(shareServers) == 0 {
		t.Error("no share server serves the work directory")
	}
	for _, h := range shareServers {
		if strings.Contains(h.environ, canary) || strings.Count(h.environ, "\x00") > 1 {
			t.Errorf("share server %d's environ holds more than its configuration: %q", h.pid, h.environ)
		}
	}
	claim := filepath.Join(rundir.DefaultBase(), ".vmmuid", strconv.Itoa(q.uid)+".claim")
	if _, err := os.Stat(claim); err == nil {
		t.Errorf("uid claim %s outlived its run", claim)
	}
}

// qemuChildren finds this process's children whose command starts with comm.
func qemuChildren(t *testing.T, comm string) []qemuSeen {
	t.Helper()
	var out []qemuSeen
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/"
		st, err := os.ReadFile(dir + "status")
		if err != nil || !strings.Contains(string(st), "\nPPid:\t"+strconv.Itoa(os.Getpid())+"\n") {
			continue
		}
		c, _ := os.ReadFile(dir + "comm")
		if !strings.HasPrefix(string(c), comm) {
			continue
		}
		q := qemuSeen{pid: pid, status: string(st)}
		for _, l := range strings.Split(q.status, "\n") {
			if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
				q.uid, _ = strconv.Atoi(f[1])
			}
		}
		env, _ := os.ReadFile(dir + "environ")
		q.environ = string(env)
		q.pidNS, _ = os.Readlink(dir + "ns/pid")
		q.ipcNS, _ = os.Readlink(dir + "ns/ipc")
		q.utsNS, _ = os.Readlink(dir + "ns/uts")
		cg, _ := os.ReadFile(dir + "cgroup")
		q.cgroup = string(cg)
		// What the process reads as /proc/cmdline, through its own root.
		cl, err := os.ReadFile(dir + "root/proc/cmdline")
		q.cmdline = string(cl)
		if err != nil {
			q.cmdline = err.Error()
		}
		out = append(out, q)
	}
	return out
}
