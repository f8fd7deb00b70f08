package jail_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail"
)

func TestWorkdirOwnerAndReadOnly(t *testing.T) {
	jailtest.Require(t)
	const uid = 4321
	t.Run("writes land owned by the user", func(t *testing.T) {
		t.Parallel()
		wd := t.TempDir()
		if err := os.Chown(wd, uid, uid); err != nil {
			t.Fatal(err)
		}
		os.Chmod(wd, 0o700)
		s := jailtest.Spec(t, "sh", "-c", `id -u; pwd; echo hello > out.txt && mkdir sub && touch sub/x && echo wrote`)
		s.Workdir = wd
		s.User = &jail.User{UID: uid, GID: uid, Home: "/home/tester"}
		var out, errb bytes.Buffer
		s.Stdout, s.Stderr = &out, &errb
		res, err := jailtest.Run(t, s)
		if err != nil || res.Exit != 0 {
			t.Fatalf("exit %d err %v stdout %q stderr %q", res.Exit, err, out.String(), errb.String())
		}
		if want := "4321\n" + wd + "\nwrote\n"; out.String() != want {
			t.Fatalf("stdout %q, want %q", out.String(), want)
		}
		for _, name := range []string{"out.txt", "sub", "sub/x"} {
			st, err := os.Stat(filepath.Join(wd, name))
			if err != nil {
				t.Fatalf("%s not on the host: %v", name, err)
			}
			sys := st.Sys().(*syscall.Stat_t)
			if sys.Uid != uid || sys.Gid != uid {
				t.Errorf("%s owned by %d:%d, want %d:%d", name, sys.Uid, sys.Gid, uid, uid)
			}
		}
		if b, _ := os.ReadFile(filepath.Join(wd, "out.txt")); string(b) != "hello\n" {
			t.Errorf("out.txt = %q", b)
		}
	})
	t.Run("read-only workdir holds even for guest root", func(t *testing.T) {
		t.Parallel()
		wd, vol := t.TempDir(), t.TempDir()
		os.WriteFile(filepath.Join(wd, "keep.txt"), []byte("original\n"), 0o644)
		s := jailtest.Spec(t, "sh", "-c", `cat keep.txt
mount -o remount,rw "$PWD" 2>/dev/null
if echo changed > keep.txt 2>/dev/null; then echo wrote-ro; else echo ro-refused; fi
if touch new.txt 2>/dev/null; then echo created-ro; else echo ro-create-refused; fi
echo data > /data/v.txt && echo vol-written
if mknod /data/null c 1 3 2>/dev/null; then echo mknod-allowed; else echo mknod-refused; fi`)
		s.Workdir, s.WorkdirRO, s.Root = wd, true, true
		s.Volumes = []jail.Volume{{Host: vol, Guest: "/data"}}
		var out bytes.Buffer
		s.Stdout = &out
		res, err := jailtest.Run(t, s)
		if err != nil || res.Exit != 0 {
			t.Fatalf("exit %d err %v stdout %q", res.Exit, err, out.String())
		}
		if want := "original\nro-refused\nro-create-refused\nvol-written\nmknod-refused\n"; out.String() != want {
			t.Fatalf("stdout %q, want %q", out.String(), want)
		}
		if b, _ := os.ReadFile(filepath.Join(wd, "keep.txt")); string(b) != "original\n" {
			t.Errorf("read-only file changed on the host: %q", b)
		}
		if _, err := os.Stat(filepath.Join(wd, "new.txt")); err == nil {
			t.Error("new.txt appeared in the read-only workdir")
		}
		if b, _ := os.ReadFile(filepath.Join(vol, "v.txt")); string(b) != "data\n" {
			t.Errorf("volume write not on the host: %q", b)
		}
	})
}

func TestRootFS(t *testing.T) {
	jailtest.Require(t)
	testreq.File(t, "/bin/busybox", "apt-get install busybox-static (make deps installs it)")
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Fatal(err)
	}
	rfs := t.TempDir()
	os.Chmod(filepath.Dir(rfs), 0o755)
	os.Chmod(rfs, 0o755)
	os.MkdirAll(filepath.Join(rfs, "bin"), 0o755)
	if err := os.WriteFile(filepath.Join(rfs, "bin", "busybox"), bb, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Symlink("busybox", filepath.Join(rfs, "bin", "sh"))
	os.WriteFile(filepath.Join(rfs, "marker"), []byte("from-rootfs\n"), 0o644)
	s := jailtest.Spec(t, "/bin/sh", "-c", `cat /marker; [ -e /usr/bin ] && echo host-usr-visible; echo x > /marker && echo overlay-writable`)
	s.RootFS = rfs
	var out bytes.Buffer
	s.Stdout = &out
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 || out.String() != "from-rootfs\noverlay-writable\n" {
		t.Fatalf("exit %d err %v stdout %q", res.Exit, err, out.String())
	}
	if b, _ := os.ReadFile(filepath.Join(rfs, "marker")); string(b) != "from-rootfs\n" {
		t.Errorf("guest write reached the rootfs on the host: %q", b)
	}
}

// TestSudoSharesOwnedByInvoker runs as root "through sudo": QEMU drops to the invoking
// user and serves the workdir over 9p, so even guest root writes land as that user.
func TestSudoSharesOwnedByInvoker(t *testing.T) {
	jailtest.Require(t)
	const uid = 4322
	t.Setenv("SUDO_UID", "4322")
	t.Setenv("SUDO_GID", "4322")
	wd := t.TempDir()
	os.Chmod(filepath.Dir(wd), 0o755)
	if err := os.Chown(wd, uid, uid); err != nil {
		t.Fatal(err)
	}
	os.Chmod(wd, 0o700)
	s := jailtest.Spec(t, "sh", "-c", `echo x > f && chown 0:0 f 2>/dev/null; mkdir d && echo wrote`)
	s.Workdir, s.Root = wd, true
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 || out.String() != "wrote\n" {
		t.Fatalf("exit %d err %v stdout %q stderr %q", res.Exit, err, out.String(), errb.String())
	}
	for _, name := range []string{"f", "d"} {
		st, err := os.Stat(filepath.Join(wd, name))
		if err != nil {
			t.Fatal(err)
		}
		if sys := st.Sys().(*syscall.Stat_t); sys.Uid != uid || sys.Gid != uid {
			t.Errorf("%s owned by %d:%d, want the invoking user %d", name, sys.Uid, sys.Gid, uid)
		}
	}
}

// TestMasksHoldAgainstGuestRoot: guest root undoes every mount it can and looks for the
// host's machine-id and ssh host keys; the host never served them.
func TestMasksHoldAgainstGuestRoot(t *testing.T) {
	jailtest.Require(t)
	id, err := os.ReadFile("/etc/machine-id")
	if err != nil || len(bytes.TrimSpace(id)) == 0 {
		testreq.Missing(t, "a host /etc/machine-id", "systemd-machine-id-setup")
	}
	s := jailtest.Spec(t, "sh", "-c", `for i in 1 2 3; do umount /etc/machine-id /etc/ssl/private /etc/shadow 2>/dev/null; done
umount -l /etc 2>/dev/null
cat /etc/machine-id /etc/ssh/ssh_host_*_key 2>/dev/null; ls -a /etc /etc/ssh 2>/dev/null; echo end`)
	s.Root = true
	var out, out2 bytes.Buffer
	s.Stdout, s.Stderr = &out, &out2
	res, err := jailtest.Run(t, s)
	if err != nil || !strings.Contains(out.String(), "end") {
		t.Fatalf("exit %d err %v (%s) out %q %q", res.Exit, err, res.ExecError, out.String(), out2.String())
	}
	out.WriteString(out2.String())
	if strings.Contains(out.String(), strings.TrimSpace(string(id))) {
		t.Error("guest root read the host's /etc/machine-id")
	}
	if strings.Contains(out.String(), "PRIVATE KEY") {
		t.Error("guest root read a host ssh key")
	}
	if strings.Contains(out.String(), "machine-id") {
		t.Error("machine-id is listed in the guest's /etc")
	}
}
