package main

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/jail/control"
)

// A FIFO behaves like an unconnected virtio-serial port: reads return EOF until a
// writer appears.
func TestPortRetriesEOFUntilConnected(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "port")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(fifo, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &port{f: f}
	defer p.Close()
	got := make(chan string, 1)
	go func() {
		b, err := io.ReadAll(p)
		if err != nil {
			got <- "error: " + err.Error()
			return
		}
		got <- string(b)
	}()
	select {
	case s := <-got:
		t.Fatalf("read returned %q before the host end connected", s)
	case <-time.After(100 * time.Millisecond):
	}
	w, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("hello"))
	w.Close() // the host going away after data is the end of the stream
	select {
	case s := <-got:
		if s != "hello" {
			t.Fatalf("read %q, want hello", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("EOF after data was not treated as end of stream")
	}
}

func TestOpenControlRejectsBadCmdline(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	for _, cmdline := range []string{
		"console=ttyS0 crackbox.ctl=serial",
		"crackbox.ctl=vsock:",
		"crackbox.ctl=vsock:port",
		"crackbox.ctl=vsock:99999999999",
	} {
		if _, err := openControl(ctlMode(cmdline), log); err == nil || !strings.Contains(err.Error(), "crackbox.ctl=") {
			t.Errorf("%q: err = %v, want an error naming crackbox.ctl", cmdline, err)
		}
	}
	cases := map[string]string{
		"console=ttyS0 quiet":                             "virtio-serial",
		"crackbox.ctl=vsock:1024 console=ttyS0":           "vsock:1024",
		"crackbox.ctl=none":                               "none",
		"crackbox.ctl=vsock:1 crackbox.ctl=virtio-serial": "virtio-serial",
	}
	for cmdline, want := range cases {
		if got := ctlMode(cmdline); got != want {
			t.Errorf("ctlMode(%q) = %q, want %q", cmdline, got, want)
		}
	}
}

// TestMasksAndHome applies masks and creates $HOME in a private mount namespace.
func TestMasksAndHome(t *testing.T) {
	if os.Getenv("CRACKBOX_INIT_HELPER") == "1" {
		if err := masksHelper(os.Getenv("CRACKBOX_INIT_DIR")); err != nil {
			println("FAIL:", err.Error())
			os.Exit(1)
		}
		println("helper ok")
		os.Exit(0)
	}
	testreq.Root(t, "mounts the masks in a private mount namespace")
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMasksAndHome$")
	cmd.Env = append(os.Environ(), "CRACKBOX_INIT_HELPER=1", "CRACKBOX_INIT_DIR="+dir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS} // Go makes / private
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "helper ok") {
		t.Fatalf("helper: %v\n%s", err, out)
	}
}

func masksHelper(dir string) error {
	// A private /run for maskEmpty, as guest-init has.
	if err := unix.Mount("tmpfs", "/run", "tmpfs", 0, "mode=0755"); err != nil {
		return err
	}
	etc := filepath.Join(dir, "etc")
	os.MkdirAll(filepath.Join(etc, "ssl", "private"), 0o755)
	os.MkdirAll(filepath.Join(etc, "ssh"), 0o755)
	os.WriteFile(filepath.Join(etc, "shadow"), []byte("root:secret"), 0o600)
	os.WriteFile(filepath.Join(etc, "ssl", "private", "key.pem"), []byte("KEY"), 0o600)
	os.WriteFile(filepath.Join(etc, "ssh", "ssh_host_ed25519_key"), []byte("SSHKEY"), 0o600)
	os.WriteFile(filepath.Join(etc, "ssh", "ssh_host_ed25519_key.pub"), []byte("PUB"), 0o644)
	masks := []string{
		filepath.Join(etc, "shadow"),
		filepath.Join(etc, "ssl", "private"),
		filepath.Join(etc, "ssh", "ssh_host_*_key"),
		filepath.Join(etc, "does-not-exist"),
	}
	if err := applyMasks(masks); err != nil {
		return err
	}
	for _, f := range []string{"shadow", "ssh/ssh_host_ed25519_key"} {
		b, err := os.ReadFile(filepath.Join(etc, f))
		if err != nil || len(b) != 0 {
			return errors.New(f + " still readable: " + string(b))
		}
		if err := os.WriteFile(filepath.Join(etc, f), []byte("x"), 0o600); err == nil {
			return errors.New(f + " writable through the mask")
		}
	}
	if b, _ := os.ReadFile(filepath.Join(etc, "ssh", "ssh_host_ed25519_key.pub")); string(b) != "PUB" {
		return errors.New("the glob masked a public key it does not match")
	}
	if ents, err := os.ReadDir(filepath.Join(etc, "ssl", "private")); err != nil || len(ents) != 0 {
		return errors.New("ssl/private still lists files")
	}
	if err := os.WriteFile(filepath.Join(etc, "ssl", "private", "new"), nil, 0o600); !errors.Is(err, unix.EROFS) {
		return errors.New("masked directory is writable")
	}

	home := filepath.Join(dir, "home", "user")
	rs := &control.RunSpec{UID: 1234, GID: 2345, Env: []string{"PATH=/bin", "HOME=" + home}}
	if err := makeHome(rs); err != nil {
		return err
	}
	fi, err := os.Stat(home)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 1234 || st.Gid != 2345 || fi.Mode().Perm() != 0o700 {
		return errors.New("home not owned 1234:2345 mode 0700")
	}
	// A share mounted at $HOME wins: nothing is created.
	other := filepath.Join(dir, "shared-home")
	rs = &control.RunSpec{UID: 1, Env: []string{"HOME=" + other}, Mounts: []control.Mount{{Tag: "h", Target: other}}}
	if err := makeHome(rs); err != nil {
		return err
	}
	if _, err := os.Stat(other); err == nil {
		return errors.New("home created under a share's mount point")
	}
	if err := makeHome(&control.RunSpec{Env: []string{"HOME=relative/home"}}); err == nil {
		return errors.New("relative HOME accepted")
	}
	return nil
}
