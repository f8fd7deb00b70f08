package jail_test

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail"
)

// TestDebianKernel boots Debian's cloud kernel (modules loaded by guest-init, every share
// over virtio-fs) in one guest running as guest root, and checks the host view, a masked
// secret (still unreadable once guest root removes the mask: the host view's virtiofsd
// reads as nobody), a workdir write, a sleep (the guest's timer) and the exit status.
func TestDebianKernel(t *testing.T) {
	kernel := os.Getenv("CRACKBOX_DEBIAN_KERNEL")
	if kernel == "" {
		testreq.Missing(t, "CRACKBOX_DEBIAN_KERNEL", "set it to the last line of guestfs/kernel/debian.sh (make debian-kernel)")
	}
	if st, err := os.Stat("/etc/shadow"); err != nil || st.Size() == 0 {
		testreq.Missing(t, "a non-empty /etc/shadow", "the host needs one to prove it stays hidden (apt-get install passwd)")
	}
	testreq.File(t, "/bin/busybox", "apt-get install busybox-static (make deps installs it): the guest's setuid umount runs as uid 1 there")
	wd := t.TempDir()
	s := jailtest.Spec(t, "sh", "-c", `uname -r
test -x /usr/bin/env && echo hostview
if [ -s /etc/shadow ]; then echo shadow-visible; else echo shadow-masked; fi
busybox umount /etc/shadow 2>/dev/null && [ -s /etc/shadow ] && echo unmasked
if cat /etc/shadow 2>/dev/null | grep -q .; then echo shadow-readable; else echo shadow-unreadable; fi
echo hello > out.txt && echo wrote
sleep 0.2 && echo slept
exit 7`)
	s.Kernel = kernel
	// A guest with no clock event never wakes from the sleep: fail well before the default.
	s.Timeout = 90 * time.Second
	s.Workdir = wd
	s.WorkdirSync = jail.WorkdirSyncExit // served live on virtio-fs: the write must still land
	s.Root = true
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 7 {
		t.Fatalf("exit %d (%s) err %v stdout %q stderr %q", res.Exit, res.ExecError, err, out.String(), errb.String())
	}
	lines := strings.SplitN(out.String(), "\n", 2)
	if !strings.Contains(lines[0], "cloud") {
		t.Errorf("uname -r = %q, want Debian's cloud kernel", lines[0])
	}
	if want := "hostview\nshadow-masked\nunmasked\nshadow-unreadable\nwrote\nslept\n"; len(lines) < 2 || lines[1] != want {
		t.Fatalf("stdout %q, want uname then %q", out.String(), want)
	}
	if b, err := os.ReadFile(filepath.Join(wd, "out.txt")); err != nil || string(b) != "hello\n" {
		t.Errorf("workdir write on the host: %q, %v", b, err)
	}
}
