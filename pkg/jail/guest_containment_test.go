package jail_test

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/internal/proctest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// attackScript is guest root trying, through the share at $1, everything that would
// leave a privileged file or a re-owned share on the host.
const attackScript = `attack() (
cd "$1" || exit 9
cp /usr/bin/id s; chmod 4755 s; chmod g+s s; chmod u+s,g+s s
cp /usr/bin/id s2; chmod 6755 s2; chown 0:0 s2; chown 1000:1000 s2
install -m 4755 /usr/bin/id s3
perl -MFcntl -e 'umask 0; sysopen(F, "s4", O_CREAT|O_WRONLY, 06755); mkdir("sgid", 02777)'
setcap cap_setuid,cap_dac_override+ep s2
mknod blk b 8 0; mknod chr c 1 3
ln /etc/passwd hardlink
ln -s / rootlink; ln -s /etc/passwd pwlink; chmod 4777 pwlink; chown 0:0 pwlink
chown 1000:1000 .; chmod 777 .; chmod 4777 .; chown -h 0:0 .
mkdir d; mv d "$1"; perl -e 'rename $ARGV[0], $ARGV[1] or exit 0' "$1" /tmp/moved
rm -rf swap; mkdir swap; mv swap swap.old; ln -s /etc swap; echo x > swap/crackbox-escape
echo done
) >/dev/null 2>&1
`

// checkShare walks a share on the host after the attack: nothing setuid/setgid, no
// device node, every entry owned by owner, the share's root unchanged.
func checkShare(t *testing.T, dir string, owner uint32, rootMode fs.FileMode) {
	t.Helper()
	st, err := os.Lstat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); sys.Uid != owner || st.Mode() != rootMode {
		t.Errorf("share root %s is now %v owned by %d, was %v owned by %d", dir, st.Mode(), sys.Uid, rootMode, owner)
	}
	var names []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		names = append(names, strings.TrimPrefix(p, dir+"/"))
		sys := fi.Sys().(*syscall.Stat_t)
		switch {
		case sys.Mode&(syscall.S_ISUID|syscall.S_ISGID) != 0:
			t.Errorf("%s is setuid/setgid on the host: %v", p, fi.Mode())
		case fi.Mode()&(fs.ModeDevice|fs.ModeCharDevice) != 0:
			t.Errorf("%s is a device node on the host", p)
		case sys.Uid != owner:
			t.Errorf("%s is owned by %d on the host, want %d", p, sys.Uid, owner)
		}
		if sz, _ := syscall.Getxattr(p, "security.capability", make([]byte, 64)); sz > 0 {
			t.Errorf("%s has file capabilities on the host", p)
		}
		return nil
	})
	if len(names) < 3 {
		t.Errorf("the attack left only %v: did the guest write at all?", names)
	}
	if _, err := os.Lstat("/etc/crackbox-escape"); err == nil {
		os.Remove("/etc/crackbox-escape")
		t.Error("a symlink swap wrote /etc/crackbox-escape on the host")
	}
}

func modeOf(t *testing.T, p string) fs.FileMode {
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode()
}

// TestShareContainment runs guest root's attacks through a workdir and a volume, as
// plain root (a root-owned workdir, a volume owned by a user) and through sudo.
func TestShareContainment(t *testing.T) {
	jailtest.Require(t)
	passwd, _ := os.ReadFile("/etc/passwd")
	t.Run("plain root", func(t *testing.T) {
		t.Parallel()
		wd, vol := t.TempDir(), t.TempDir()
		os.Chmod(filepath.Dir(vol), 0o755)
		if err := os.Chown(vol, 4323, 4323); err != nil {
			t.Fatal(err)
		}
		os.Chmod(vol, 0o750)
		wdMode := modeOf(t, wd)
		s := jailtest.Spec(t, "sh", "-c", attackScript+`attack "$1"; attack /data; echo vol-done`, "sh", wd)
		s.Workdir, s.Root = wd, true
		s.Volumes = []jail.Volume{{Host: vol, Guest: "/data"}}
		var out, errb bytes.Buffer
		s.Stdout, s.Stderr = &out, &errb
		res, err := jailtest.Run(t, s)
		if err != nil || !strings.Contains(out.String(), "vol-done") {
			t.Fatalf("exit %d err %v stdout %q stderr %q", res.Exit, err, out.String(), errb.String())
		}
		checkShare(t, wd, 0, wdMode)
		checkShare(t, vol, 4323, fs.ModeDir|0o750)
	})
	t.Run("sudo", func(t *testing.T) {
		t.Setenv("SUDO_UID", "4324")
		t.Setenv("SUDO_GID", "4324")
		wd := t.TempDir()
		os.Chmod(filepath.Dir(wd), 0o755)
		if err := os.Chown(wd, 4324, 4324); err != nil {
			t.Fatal(err)
		}
		wdMode := modeOf(t, wd)
		s := jailtest.Spec(t, "sh", "-c", attackScript+`attack "$1"; echo done`, "sh", wd)
		s.Workdir, s.Root = wd, true
		var out, errb bytes.Buffer
		s.Stdout, s.Stderr = &out, &errb
		res, err := jailtest.Run(t, s)
		if err != nil || !strings.Contains(out.String(), "done") {
			t.Fatalf("exit %d err %v stdout %q stderr %q", res.Exit, err, out.String(), errb.String())
		}
		checkShare(t, wd, 4324, wdMode)
	})
	if now, _ := os.ReadFile("/etc/passwd"); !bytes.Equal(now, passwd) {
		t.Error("/etc/passwd changed on the host")
	}
}

// TestDiskQuota writes past --disk-quota: the guest gets ENOSPC and the host file stops
// at the quota. Empty files count too (a block each), so a guest cannot spend the host's
// inodes instead: 1 MiB holds 256 entries. A full file removed while the guest holds it
// open still holds its room, until the last close.
func TestDiskQuota(t *testing.T) {
	jailtest.Require(t)
	wd := t.TempDir()
	s := jailtest.Spec(t, "sh", "-c", `i=0; while [ $i -lt 300 ]; do true > e$i 2>/dev/null || break; i=$((i+1)); done
echo "entries=$i"; rm -f e*
dd if=/dev/zero of=big bs=64k count=200 2>&1; echo "dd=$?"
echo "size=$(wc -c <big)"; exec 3<big; rm big
dd if=/dev/zero of=next bs=64k count=1 2>/dev/null; echo "held=$?"
exec 3<&-
dd if=/dev/zero of=next bs=64k count=1 2>/dev/null; echo "closed=$?"`)
	s.Workdir = wd
	s.DiskQuota = 1 << 20
	var out, out2 bytes.Buffer
	s.Stdout, s.Stderr = &out, &out2
	if _, err := jailtest.Run(t, s); err != nil {
		t.Fatal(err)
	}
	out.WriteString(out2.String())
	if !strings.Contains(out.String(), "No space left on device") || strings.Contains(out.String(), "dd=0") {
		t.Errorf("guest output %q, want ENOSPC from dd", out.String())
	}
	size := -1
	if _, after, ok := strings.Cut(out.String(), "size="); ok {
		fmt.Sscanf(after, "%d", &size)
	}
	if size < 900<<10 || size > 1<<20 {
		t.Errorf("big grew to %d bytes, want near the 1 MiB quota; output %q", size, out.String())
	}
	var total int64
	filepath.WalkDir(wd, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && d.Type().IsRegular() {
			total += fi.Size()
		}
		return nil
	})
	if total > 1<<20 {
		t.Errorf("the share holds %d bytes on the host; quota 1 MiB", total)
	}
	entries := -1
	if _, after, ok := strings.Cut(out.String(), "entries="); ok {
		fmt.Sscanf(after, "%d", &entries)
	}
	if !strings.Contains(out.String(), "held=1") || !strings.Contains(out.String(), "closed=0") {
		t.Errorf("guest output %q, want a write refused while the removed file is open (held=1) and allowed after its close (closed=0)", out.String())
	}
	if entries < 240 || entries > 256 {
		t.Errorf("guest made %d empty files in a 1 MiB share, want at most 256; output %q", entries, out.String())
	}
}

// TestShareServerEnds is a share server ending mid-run, as it does past its memory
// limit: the guest gets I/O errors from the share at once, nothing more reaches the
// host directory, and the run still ends on its own.
func TestShareServerEnds(t *testing.T) {
	jailtest.Require(t)
	wd := t.TempDir()
	s := jailtest.Spec(t, "sh", "-c", `echo x > ready
i=0; while [ $i -lt 600 ] && ls . >/dev/null 2>&1; do sleep 0.1; i=$((i+1)); done
echo "polls=$i"; echo x > after; echo "write=$?"`)
	s.Workdir = wd
	// One buffer takes both streams, which the run copies concurrently.
	var out nettest.Buffer
	s.Stdout, s.Stderr = &out, &out
	done := make(chan error, 1)
	go func() { _, err := jailtest.Run(t, s); done <- err }()

	killed := 0
	eventually.Within(4*time.Minute, func() bool {
		if _, err := os.Stat(filepath.Join(wd, "ready")); err != nil {
			return false
		}
		// The workdir's server holds the share's directory as its fd 4.
		for _, pid := range proctest.Children("crackbox-share") {
			if dir, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/4", pid)); dir == wd {
				if err := syscall.Kill(pid, syscall.SIGKILL); err == nil {
					killed++
				}
			}
		}
		return killed > 0
	})
	if killed != 1 {
		t.Fatalf("killed %d share servers for %s, want its one", killed, wd)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("the run did not end 3 minutes after its share server did")
	}
	got := out.String()
	t.Logf("guest output %q", got)
	if strings.Contains(got, "polls=600") || !strings.Contains(got, "polls=") || strings.Contains(got, "write=0") {
		t.Errorf("guest output %q: want the share to fail the next poll and the write", got)
	}
	if _, err := os.Stat(filepath.Join(wd, "after")); err == nil {
		t.Error("a write after the share server ended reached the host")
	}
}
