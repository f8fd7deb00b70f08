package sharefs

import (
	"bytes"
	"fmt"
	"github.com/crackbox/crackbox/internal/testreq"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/hugelgupf/p9/linux"
	"github.com/hugelgupf/p9/p9"
)

// startShare starts a real share server process for cfg, attaches a client with
// message size msize, and returns the root and the server's pid.
func startShare(t testing.TB, cfg Config, msize uint32) (p9.File, int) {
	t.Helper()
	s, err := Start(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	host, guest := net.Pipe()
	done := make(chan struct{})
	go func() { s.Serve(host); close(done) }()
	c, err := p9.NewClient(guest, p9.WithMessageSize(msize))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(); guest.Close(); <-done })
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	return root, s.cmd.Process.Pid
}

// serveDir starts a real share server process for dir and returns the attached root.
func serveDir(t *testing.T, dir string, quota int64) p9.File {
	t.Helper()
	root, _ := startShare(t, Config{Dir: dir, Quota: quota, Log: os.Stderr}, 64<<10)
	return root
}

func walk(t *testing.T, root p9.File, names ...string) p9.File {
	t.Helper()
	_, f, err := root.Walk(names)
	if err != nil {
		t.Fatalf("walk %v: %v", names, err)
	}
	return f
}

func lstat(t *testing.T, p string) *syscall.Stat_t {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t)
}

// shareOwner makes a share directory owned by uid 1000 when the test runs as root, so
// the server must drop to that user.
func shareOwner(t *testing.T) (string, uint32) {
	dir := t.TempDir()
	if os.Geteuid() != 0 {
		return dir, uint32(os.Getuid())
	}
	if err := os.Chmod(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 1000, 1000); err != nil {
		t.Fatal(err)
	}
	return dir, 1000
}

// TestPolicy is a hostile client against a real share server: every attempt to plant
// a privileged file or escape the share is refused, and what is allowed lands owned by
// the share's owner.
func TestPolicy(t *testing.T) {
	dir, owner := shareOwner(t)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("host secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	root := serveDir(t, dir, 0)

	// A create asking for setuid/setgid lands without them, owned by the share's owner.
	f, _, _, err := walk(t, root).Create("s", p9.ReadWrite, 0o6755, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("#!/bin/sh\n"), 0); err != nil {
		t.Fatal(err)
	}
	st := lstat(t, filepath.Join(dir, "s"))
	if st.Mode&0o7777 != 0o755 || st.Uid != owner {
		t.Fatalf("created s: mode %o uid %d, want 0755 owned by %d", st.Mode&0o7777, st.Uid, owner)
	}
	s := walk(t, root, "s")
	// The 9p decoder already drops setuid/setgid from a setattr; either way none lands.
	for _, m := range []p9.FileMode{0o4755, 0o2755, 0o6777} {
		_ = s.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: m})
		if st := lstat(t, filepath.Join(dir, "s")); st.Mode&0o6000 != 0 {
			t.Fatalf("chmod %o: host file is %o", m, st.Mode&0o7777)
		}
	}
	if err := s.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o755}); err != nil {
		t.Fatal(err)
	}
	refused := []struct {
		name string
		err  error
	}{
		{"chown", s.SetAttr(p9.SetAttrMask{UID: true, GID: true}, p9.SetAttr{UID: 0, GID: 0})},
		{"chmod share root", walk(t, root).SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o777})},
		{"chown share root", walk(t, root).SetAttr(p9.SetAttrMask{UID: true}, p9.SetAttr{UID: 0})},
		{"setxattr security.capability", s.SetXattr("security.capability", []byte{1, 0, 0, 2}, 0)},
		{"walk ..", func() error { _, _, err := root.Walk([]string{".."}); return err }()},
	}
	_, err = walk(t, root).Mknod("blk", p9.ModeBlockDevice|0o666, 8, 0, 0, 0)
	refused = append(refused, struct {
		name string
		err  error
	}{"mknod block device", err})
	_, err = walk(t, root).Mknod("chr", p9.ModeCharacterDevice|0o666, 1, 3, 0, 0)
	refused = append(refused, struct {
		name string
		err  error
	}{"mknod char device", err})
	for _, r := range refused {
		if r.err == nil {
			t.Errorf("%s: allowed", r.name)
		}
	}
	st = lstat(t, filepath.Join(dir, "s"))
	if st.Mode&0o7777 != 0o755 || st.Uid != owner {
		t.Fatalf("s after attacks: mode %o uid %d", st.Mode&0o7777, st.Uid)
	}
	rst := lstat(t, dir)
	if rst.Uid != owner || rst.Mode&0o7777 == 0o777 {
		t.Fatalf("share root re-owned or re-moded: uid %d mode %o", rst.Uid, rst.Mode&0o7777)
	}
	for _, n := range []string{"blk", "chr"} {
		if _, err := os.Lstat(filepath.Join(dir, n)); err == nil {
			t.Errorf("%s exists on the host", n)
		}
	}

	// A symlink the guest plants to a host path is never followed by the server.
	if _, err := walk(t, root).Symlink(filepath.Dir(outside), "esc", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, _, err := root.Walk([]string{"esc", "secret"}); err == nil {
		t.Error("walked through a symlink to a host directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "esc")); err != nil {
		t.Fatal(err)
	}
	esc := walk(t, root, "esc")
	if _, _, err := esc.Open(p9.ReadOnly); err == nil {
		t.Error("opened a symlink to a host directory")
	}
	if err := esc.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o700}); err == nil {
		if st := lstat(t, filepath.Dir(outside)); st.Mode&0o777 == 0o700 {
			t.Error("chmod followed a symlink out of the share")
		}
	}
	// Allowed operations still work.
	if err := s.SetAttr(p9.SetAttrMask{Permissions: true}, p9.SetAttr{Permissions: 0o700}); err != nil {
		t.Errorf("plain chmod: %v", err)
	}
	if _, err := walk(t, root).Mkdir("d", 0o2775, 0, 0); err != nil {
		t.Fatal(err)
	}
	if st := lstat(t, filepath.Join(dir, "d")); st.Mode&0o7777 != 0o775 || st.Uid != owner {
		t.Errorf("mkdir: mode %o uid %d", st.Mode&0o7777, st.Uid)
	}
	if err := walk(t, root).Link(walk(t, root, "s"), "s2"); err != nil {
		t.Errorf("hard link inside the share: %v", err)
	}
	if err := walk(t, root).RenameAt("s2", walk(t, root, "d"), "s3"); err != nil {
		t.Errorf("rename: %v", err)
	}
}

// TestQuota writes past the share's quota and gets ENOSPC; removing a file frees room.
func TestQuota(t *testing.T) {
	dir, _ := shareOwner(t)
	root := serveDir(t, dir, 1<<20+entryCost) // room for big's entry and 1 MiB
	f, _, _, err := walk(t, root).Create("big", p9.WriteOnly, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var off int64
	for ; off < 2<<20; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			if linux.ExtractErrno(err) != linux.ENOSPC {
				t.Fatalf("write at %d: %v, want ENOSPC", off, err)
			}
			break
		}
	}
	if off != 1<<20 {
		t.Fatalf("quota 1 MiB: first refused write at %d", off)
	}
	if st := lstat(t, filepath.Join(dir, "big")); st.Size != 1<<20 {
		t.Fatalf("big is %d bytes on the host", st.Size)
	}
	f.Close() // an open file's data stays on the host until its last close
	if err := walk(t, root).UnlinkAt("big", 0); err != nil {
		t.Fatal(err)
	}
	g, _, _, err := walk(t, root).Create("again", p9.WriteOnly, 0o644, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := g.WriteAt(buf, 0); err != nil {
		t.Fatalf("write after freeing room: %v", err)
	}
}

// TestHide: hidden paths cannot be walked to or listed, even through the directory.
func TestHide(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{"machine-id", "ssh/key", "ssh/key.pub"} {
		os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755)
		if err := os.WriteFile(filepath.Join(dir, p), []byte("secret"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host, guest := net.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- Serve(Config{Dir: dir, ReadOnly: true, Hide: []string{"machine-id", "ssh/key"}, Log: os.Stderr}, host, slog.New(slog.DiscardHandler))
	}()
	c, err := p9.NewClient(guest)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Close()
		guest.Close()
		<-done
	}()
	root, err := c.Attach("")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range [][]string{{"machine-id"}, {"ssh", "key"}} {
		if _, _, err := root.Walk(p); err == nil {
			t.Errorf("walked to hidden %v", p)
		}
	}
	if _, _, err := root.Walk([]string{"ssh", "key.pub"}); err != nil {
		t.Errorf("key.pub: %v", err)
	}
	for _, d := range [][]string{nil, {"ssh"}} {
		f := walk(t, root, d...)
		if _, _, err := f.Open(p9.ReadOnly); err != nil {
			t.Fatal(err)
		}
		ents, err := f.Readdir(0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			if e.Name == "machine-id" || e.Name == "key" {
				t.Errorf("%v lists hidden %s", d, e.Name)
			}
		}
	}
	if _, _, _, err := walk(t, root).Create("new", p9.WriteOnly, 0o644, 0, 0); err == nil {
		t.Error("created a file in a read-only share")
	}
}

// TestHelperLockedDown: the process serving a root-owned share (the owner stays uid 0)
// holds no capability, has no_new_privs and a seccomp filter, and is chrooted into the
// share.
func TestHelperLockedDown(t *testing.T) {
	testreq.Root(t, "checks the chroot and the capability drop")
	dir := t.TempDir()
	root := serveDir(t, dir, 0)
	walk(t, root) // the server is up
	var found bool
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		cmdline, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if string(bytes.TrimRight(cmdline, "\x00")) != "crackbox-share" {
			continue
		}
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		if !bytes.Contains(status, []byte(fmt.Sprintf("PPid:\t%d\n", os.Getpid()))) {
			continue
		}
		found = true
		for _, want := range []string{"CapPrm:\t0000000000000000", "CapEff:\t0000000000000000", "CapInh:\t0000000000000000", "CapAmb:\t0000000000000000", "NoNewPrivs:\t1", "Seccomp:\t2", "Uid:\t0\t0\t0\t0"} {
			if !bytes.Contains(status, []byte(want)) {
				t.Errorf("share server status lacks %q:\n%s", want, status)
			}
		}
		if r, err := os.Readlink("/proc/" + e.Name() + "/root"); err != nil || r != dir {
			t.Errorf("share server root is %q (%v), want %s", r, err, dir)
		}
	}
	if !found {
		t.Fatal("no share server process found")
	}
}

// TestPolicyUnprivileged runs TestPolicy and the quota tests in a copy of this test binary as
// uid 1000: the server then runs without chroot, as the caller, and the policy must hold
// all the same.
func TestPolicyUnprivileged(t *testing.T) {
	testreq.Root(t, "runs the unprivileged case by dropping from root to uid 1000")
	dir, err := os.MkdirTemp("", "sharefs-unpriv-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	os.Chmod(dir, 0o755)
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "sharefs.test")
	if err := os.WriteFile(bin, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run", "^(TestPolicy|TestQuota|TestQuotaEntries|TestHide)$", "-test.count=1", "-test.v")
	cmd.Env = []string{"TMPDIR=/tmp", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1000, Gid: 1000, NoSetGroups: true}}
	out, err := cmd.CombinedOutput()
	if err != nil || !bytes.Contains(out, []byte("--- PASS: TestPolicy ")) || !bytes.Contains(out, []byte("--- PASS: TestQuota ")) || !bytes.Contains(out, []byte("--- PASS: TestQuotaEntries ")) {
		t.Fatalf("as uid 1000: %v\n%s", err, out)
	}
}
