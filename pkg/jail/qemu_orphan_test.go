package jail

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// A QEMU whose crackbox died before its parent-death signal was armed (a SIGKILL
// during the fork: in a new pid namespace the child cannot see that its parent is
// gone) has nobody to connect its control channel to, and exits before it loads a
// kernel. With crackbox alive the same command line connects first, then goes on to
// the kernel, which here is not one.
func TestQEMUWithoutHostExits(t *testing.T) {
	qemu, err := install.FindQEMU()
	testreq.Check(t, err, "qemu-system-x86_64", "apt-get install qemu-system-x86 (make deps installs it)")
	dir := t.TempDir()
	kernel := filepath.Join(dir, "kernel")
	if err := os.WriteFile(kernel, []byte("not a kernel"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(t *testing.T, sock string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cfg := vmConfig{Machine: MachineMicrovm, Accel: AccelTCG, CPUs: 1, MemoryMiB: 64,
			Kernel: kernel, Initrd: kernel, CtlSock: sock, QMPSock: filepath.Join(t.TempDir(), "qmp.sock")}
		out, err := exec.CommandContext(ctx, qemu, cfg.args()...).CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("qemu still running after %v: %s", 2*time.Minute, out)
		}
		return string(out), err
	}
	listen := func(t *testing.T) *net.UnixListener {
		ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(t.TempDir(), "ctl.sock"), Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}

	t.Run("listener closed and socket file left", func(t *testing.T) {
		ln := listen(t)
		sock := ln.Addr().String()
		ln.SetUnlinkOnClose(false)
		ln.Close()
		out, err := run(t, sock)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(out, sock) || strings.Contains(out, "kernel") {
			t.Fatalf("qemu = %v, want it to exit on the control socket before the kernel:\n%s", err, out)
		}
	})
	t.Run("socket file gone", func(t *testing.T) {
		sock := filepath.Join(t.TempDir(), "ctl.sock")
		out, err := run(t, sock)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || !strings.Contains(out, sock) || strings.Contains(out, "kernel") {
			t.Fatalf("qemu = %v, want it to exit on the control socket before the kernel:\n%s", err, out)
		}
	})
	t.Run("host alive", func(t *testing.T) {
		ln := listen(t)
		defer ln.Close()
		accepted := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Close()
			}
			accepted <- err
		}()
		out, err := run(t, ln.Addr().String())
		if err == nil || !strings.Contains(out, "kernel") {
			t.Fatalf("qemu = %v, want it past the control socket and stopped at the bogus kernel:\n%s", err, out)
		}
		select {
		case err := <-accepted:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("qemu never connected to the control socket")
		}
	})
}
