package jail_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/jailtest"
)

// qemuSeen is what the host can read about a running guest's QEMU.
type qemuSeen struct {
	pid     int
	uid     int
	environ string
	status  string
	pidNS   string
	cgroup  string
}

// TestQEMUOwnUIDNoEnvJailed runs two guests at once, each blocked until the host has
// looked at its QEMU: the QEMUs run as two different uids of the vmm block, carry none
// of crackbox's environment (a canary), have no_new_privs, their own pid namespace and
// the run's cgroup; afterwards both uid claims are gone.
func TestQEMUOwnUIDNoEnvJailed(t *testing.T) {
	jailtest.Require(t)
	canary := "canary-" + strconv.Itoa(os.Getpid())
	t.Setenv("CRACKBOX_TEST_CANARY", canary)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()

	type run struct {
		w    *io.PipeWriter
		done chan error
	}
	started := make(chan struct{}, 2)
	var runs []run
	for range 2 {
		r, w := io.Pipe()
		s := jailtest.Spec(t, "sh", "-c", "read x; echo ok")
		s.Stdin = r
		s.Env = []string{"GUEST_SECRET=" + canary}
		var out bytes.Buffer
		s.Stdout = &out
		s.Started = func(int) { started <- struct{}{} }
		done := make(chan error, 1)
		go func() {
			res, err := jailtest.RunContext(t, ctx, s)
			if err == nil && (res.Exit != 0 || !strings.Contains(out.String(), "ok")) {
				err = io.ErrUnexpectedEOF
			}
			done <- err
		}()
		runs = append(runs, run{w, done})
	}
	defer func() {
		for _, r := range runs {
			r.w.Close()
		}
	}()
	for range 2 {
		select {
		case <-started:
		case <-ctx.Done():
			t.Fatal("the two guests did not both start")
		}
	}
	seen := qemuChildren(t)
	if len(seen) != 2 {
		t.Fatalf("found %d QEMU children, want 2: %+v", len(seen), seen)
	}
	selfNS, _ := os.Readlink("/proc/self/ns/pid")
	for _, q := range seen {
		if q.uid < jail.VMMUIDBase || q.uid >= jail.VMMUIDBase+jail.VMMUIDCount {
			t.Errorf("QEMU %d runs as uid %d, outside the vmm block", q.pid, q.uid)
		}
		if strings.Contains(q.environ, canary) || strings.Contains(q.environ, "CRACKBOX_TEST_CANARY") {
			t.Errorf("QEMU %d's environ holds crackbox's environment: %q", q.pid, q.environ)
		}
		if !strings.Contains(q.status, "NoNewPrivs:\t1") {
			t.Errorf("QEMU %d lacks no_new_privs", q.pid)
		}
		if q.pidNS == selfNS {
			t.Errorf("QEMU %d shares crackbox's pid namespace %s", q.pid, selfNS)
		}
		if _, err := jail.CgroupSupport(); err == nil && !strings.Contains(q.cgroup, "crackbox.vmm/") {
			t.Errorf("QEMU %d is not in a run's cgroup leaf:\n%s", q.pid, q.cgroup)
		}
	}
	if seen[0].uid == seen[1].uid {
		t.Errorf("two concurrent runs share QEMU uid %d", seen[0].uid)
	}
	for _, r := range runs {
		r.w.Close()
		if err := <-r.done; err != nil {
			t.Errorf("guest: %v", err)
		}
	}
	for _, q := range seen {
		claim := filepath.Join("/run/crackbox/.vmmuid", strconv.Itoa(q.uid)+".claim")
		if _, err := os.Stat(claim); err == nil {
			t.Errorf("uid claim %s outlived its run", claim)
		}
	}
}

// qemuChildren finds this process's QEMU children (the launcher execs QEMU in place).
func qemuChildren(t *testing.T) []qemuSeen {
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
		comm, _ := os.ReadFile(dir + "comm")
		if !strings.HasPrefix(string(comm), "qemu-system") {
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
		cg, _ := os.ReadFile(dir + "cgroup")
		q.cgroup = string(cg)
		out = append(out, q)
	}
	return out
}
