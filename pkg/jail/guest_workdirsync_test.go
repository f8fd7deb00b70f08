package jail_test

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// syncJobs, after workdirJobs, changes what the workdir held before the run (a
// deletion, a directory replaced, a directory renamed, an append) and, as guest root,
// plants what the host must refuse or neutralise when the changes come back: a device
// node, a fifo, a setuid file, a symlink out of the workdir, and a file past the quota
// (the guest's own layer refuses that one).
const syncJobs = `
cd "$WD"
rm gone
rm -rf replaced && mkdir replaced && echo new > replaced/inner
mv olddir newdir
echo more >> keep
mknod null c 1 3
mkfifo fifo
printf '#!/bin/sh\n' > suid && chmod 4755 suid
ln -s "$OUTSIDE" esc
dd if=/dev/zero of=huge bs=1M count=80 2>/dev/null && echo huge-written || echo huge-refused
rm -f huge
echo "exit-mode done"
`

// TestWorkdirSyncExit runs the real jobs in a workdir synced at exit, in one guest, and
// checks from the host that every change arrived once the run ended, and that nothing
// the policy forbids did.
func TestWorkdirSyncExit(t *testing.T) {
	jailtest.Require(t)
	wd := jobsWorkdir(t)
	outside := t.TempDir()
	os.WriteFile(filepath.Join(outside, "secret"), []byte("host secret"), 0o644)
	for _, f := range []string{"gone", "keep", "replaced/old", "olddir/x"} {
		os.MkdirAll(filepath.Dir(filepath.Join(wd, f)), 0o755)
		os.WriteFile(filepath.Join(wd, f), []byte("old\n"), 0o644)
	}
	s := jailtest.Spec(t, "sh", "-c", strings.Replace(workdirJobs, "set -e\n", "set -e\nWD=$PWD\n", 1)+syncJobs)
	s.Workdir, s.Root = wd, true
	s.WorkdirSync = jail.WorkdirSyncExit
	s.DiskQuota = 64 << 20
	s.Env = append(s.Env, "OUTSIDE="+outside)
	s.Timeout = 8 * time.Minute
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v\nstdout %s\nstderr %s", res.Exit, err, out.String(), errb.String())
	}
	want := "journal wal\nrows 100\nmmap hello\nvenv hi from the workdir\ngit-clean 0\nshare ports busy=2 free=4\nhuge-refused\nexit-mode done\n"
	if out.String() != want {
		t.Fatalf("stdout %q, want %q\nstderr %s", out.String(), want, errb.String())
	}
	read := func(f string) string { b, _ := os.ReadFile(filepath.Join(wd, f)); return string(b) }
	if b := read("m.bin"); len(b) != 8192 || b[4096:4101] != "hello" {
		t.Errorf("the mmap write did not reach the host file: len %d", len(b))
	}
	for _, f := range []string{"t.db", "venv/pyvenv.cfg", "venv/bin/python", "repo/.git/HEAD", "newdir/x", "replaced/inner"} {
		if _, err := os.Lstat(filepath.Join(wd, f)); err != nil {
			t.Errorf("%s not on the host: %v", f, err)
		}
	}
	for _, f := range []string{"gone", "olddir", "replaced/old", "null", "fifo", "huge"} {
		if _, err := os.Lstat(filepath.Join(wd, f)); !os.IsNotExist(err) {
			t.Errorf("%s on the host after the run (%v)", f, err)
		}
	}
	if got := read("keep"); got != "old\nmore\n" {
		t.Errorf("keep: %q", got)
	}
	if st, err := os.Lstat(filepath.Join(wd, "suid")); err != nil || st.Mode()&(os.ModeSetuid|os.ModeSetgid) != 0 {
		t.Errorf("suid on the host: %v, %v", st.Mode(), err)
	}
	if l, err := os.Readlink(filepath.Join(wd, "esc")); err != nil || l != outside {
		t.Errorf("esc: %q, %v; want the symlink itself", l, err)
	}
	if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "host secret" {
		t.Errorf("outside the workdir: %q", b)
	}
}

// TestWorkdirSyncTimeout: a run stopped by its timeout still hands back what its
// command wrote in a workdir synced at exit.
func TestWorkdirSyncTimeout(t *testing.T) {
	jailtest.Require(t)
	wd := t.TempDir()
	os.Chmod(filepath.Dir(wd), 0o755)
	s := jailtest.Spec(t, "sh", "-c", "echo kept > written && echo ready && exec sleep 600")
	s.Workdir, s.Root = wd, true
	s.WorkdirSync = jail.WorkdirSyncExit
	s.Timeout = 45 * time.Second
	_, err := jailtest.Run(t, s)
	if !errors.Is(err, jail.ErrTimeout) {
		t.Fatalf("err %v, want a timeout", err)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "written")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the write before the timeout: %q, %v", b, err)
	}
}
