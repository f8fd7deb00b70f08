package jail_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
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

// swapJobs takes half the guest's memory and waits for its swap to come on (guest-init
// turns it on then, or a second into the run), then writes 300 MiB of incompressible new
// files into the workdir, more than three quarters of a 256 MiB guest, lists the share
// (9p needs 1 MiB buffers, which a guest whose memory is full cannot find) and prints the
// files' hashes. Between the two, as a guest that turns its swap off, it writes past the
// swap disk's end, which the host must refuse.
const swapJobs = `
set -e
swaps() { awk 'NR==2 {print $3}' /proc/swaps; }
head -c 160M /dev/zero > fill
i=0
while [ -z "$(swaps)" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done
rm fill
echo "swap $(swaps)"
dev=$(awk 'NR==2 {print $1}' /proc/swaps)
if [ -n "$dev" ]; then
  swapoff "$dev"
  if dd if=/dev/zero of="$dev" bs=1M seek=600 count=1 oflag=direct conv=notrunc 2>/dev/null; then echo past-end-written; else echo past-end-refused; fi
  swapon "$dev"
fi
i=1
while [ $i -le 30 ]; do head -c 10485760 /dev/urandom > "big$i"; i=$((i+1)); done
# Memory is full of the upper layer now: reading the share must still work.
for k in 1 2 3; do ls -la >/dev/null; done
sha256sum big*
`

// TestWorkdirSyncSwap: a workdir synced at exit holds more new data than the guest's
// memory (its upper layer swaps to the run's swap disk), and all of it reaches the host.
func TestWorkdirSyncSwap(t *testing.T) {
	jailtest.Require(t)
	wd := t.TempDir()
	os.Chmod(filepath.Dir(wd), 0o755)
	s := jailtest.Spec(t, "sh", "-c", swapJobs)
	s.Workdir, s.Root = wd, true
	s.WorkdirSync = jail.WorkdirSyncExit
	s.MemoryMiB = 256
	s.DiskQuota = 512 << 20
	s.RunDirBase = t.TempDir()
	s.Timeout = 10 * time.Minute
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("exit %d err %v\nstdout %s\nstderr %s", res.Exit, err, out.String(), errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 32 || lines[0] != "swap 524284" || lines[1] != "past-end-refused" {
		t.Fatalf("stdout %q\nstderr %s", out.String(), errb.String())
	}
	for _, l := range lines[2:] {
		sum, name, _ := strings.Cut(l, "  ")
		b, err := os.ReadFile(filepath.Join(wd, name))
		if err != nil {
			t.Fatalf("%s not on the host: %v", name, err)
		}
		if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != sum || len(b) != 10<<20 {
			t.Errorf("%s on the host: %d bytes, sha256 %x; the guest wrote %s", name, len(b), h, sum)
		}
	}
	// The swap disk never had a name; nothing of it is left in the run dirs or the cache.
	for _, dir := range []string{s.RunDirBase, s.CacheDir} {
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && strings.Contains(d.Name(), "swap") {
				t.Errorf("left after the run: %s", p)
			}
			return nil
		})
	}
}
