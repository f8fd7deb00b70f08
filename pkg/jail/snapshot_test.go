package jail

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSnapshotCompatible(t *testing.T) {
	s9 := func(target string) share { return share{Target: target, FS: FS9P} }
	base := snapInput{Mode: SnapshotAuto, Machine: MachineMicrovm, RootMode: "hostview", NetMode: NetNone}
	cases := []struct {
		name string
		edit func(*snapInput)
		ok   bool
		why  string
	}{
		{"defaults", func(*snapInput) {}, true, ""},
		{"mode on", func(in *snapInput) { in.Mode = SnapshotOn }, true, ""},
		{"proxy-only", func(in *snapInput) { in.NetMode = NetProxyOnly }, true, ""},
		{"9p workdir and a volume", func(in *snapInput) { in.Shares = []share{s9("/w"), s9("/a")} }, true, ""},
		{"tap network", func(in *snapInput) { in.NetMode = NetTap }, true, ""},
		{"mode off", func(in *snapInput) { in.Mode = SnapshotOff }, false, "off"},
		{"q35", func(in *snapInput) { in.Machine = MachineQ35 }, false, "q35"},
		{"modular kernel", func(in *snapInput) { in.Modular = true }, false, "modular"},
		{"rootfs", func(in *snapInput) { in.RootMode = "rootfs" }, false, "rootfs"},
		{"more shares than slots", func(in *snapInput) { in.Shares = []share{s9("/a"), s9("/b"), s9("/c")} }, false, "slots"},
		{"stream shares need no slot", func(in *snapInput) {
			in.Shares = []share{{Target: "/a", FS: FSStream}, {Target: "/b", FS: FSStream}, {Target: "/c", FS: FSStream}}
		}, true, ""},
		{"virtio-fs workdir", func(in *snapInput) { in.Shares = []share{{Target: "/w", FS: FSVirtiofs}} }, false, "virtiofs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := base
			c.edit(&in)
			ok, why := snapshotCompatible(in)
			if ok != c.ok || !strings.Contains(why, c.why) {
				t.Fatalf("snapshotCompatible = %v, %q; want %v and a reason naming %q", ok, why, c.ok, c.why)
			}
		})
	}
}

func TestSnapshotMode(t *testing.T) {
	cases := []struct {
		spec, env, want string
		bad             bool
	}{
		{"", "", SnapshotAuto, false},
		{"", "off", SnapshotAuto, false}, // the caller's config maps CRACKBOX_SNAPSHOT
		{"on", "off", SnapshotOn, false},
		{"off", "", SnapshotOff, false},
		{"auto", "", SnapshotAuto, false},
		{"yes", "", "", true},
		{"", "never", SnapshotAuto, false},
	}
	for _, c := range cases {
		t.Setenv("CRACKBOX_SNAPSHOT", c.env)
		got, err := snapshotMode(c.spec)
		if got != c.want || (err != nil) != c.bad {
			t.Errorf("snapshotMode(%q) with env %q = %q, %v; want %q (error %v)", c.spec, c.env, got, err, c.want, c.bad)
		}
	}
}

// TestSnapKey: the key ignores per-run paths but changes with anything a restore must match.
func TestSnapKey(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for _, n := range []string{"qemu", "vmlinux", "initrd"} {
		p := filepath.Join(dir, n)
		if err := os.WriteFile(p, []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	cfg := func(edit func(*vmConfig)) vmConfig {
		c := vmConfig{Machine: MachineMicrovm, Accel: AccelTCG, CPUs: 1, MemoryMiB: 256,
			Kernel: "/dev/fd/3", Initrd: "/dev/fd/4", Append: "console=ttyS0",
			CtlSock: "/run/a/ctl.sock", QMPSock: "/run/a/qmp.sock", Shares: snapLayout(nil, "/run/a/empty"), FixedNIC: true}
		if edit != nil {
			edit(&c)
		}
		return c
	}
	key := func(c vmConfig) string {
		k, err := snapKey(files[0], files[1], files[2], "cpu max", c)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	k0 := key(cfg(nil))
	same := key(cfg(func(c *vmConfig) {
		c.CtlSock, c.QMPSock, c.Incoming, c.TapFD = "/run/b/ctl.sock", "/run/b/qmp.sock", "fd:5", 6
		c.Shares = snapLayout([]share{{Tag: "v0", Host: "/home/x/proj", Target: "/home/x/proj", FS: FS9P}}, "/run/b/empty")
	}))
	if same != k0 {
		t.Fatalf("per-run paths changed the key: %s vs %s", same, k0)
	}
	for name, c := range map[string]vmConfig{
		"memory":  cfg(func(c *vmConfig) { c.MemoryMiB = 512 }),
		"cpus":    cfg(func(c *vmConfig) { c.CPUs = 2 }),
		"accel":   cfg(func(c *vmConfig) { c.Accel = AccelKVM }),
		"cmdline": cfg(func(c *vmConfig) { c.Append += " crackbox.debug" }),
	} {
		if key(c) == k0 {
			t.Errorf("%s did not change the key", name)
		}
	}
	if k, _ := snapKey(files[0], files[1], files[2], "cpu qemu64", cfg(nil)); k == k0 {
		t.Error("the CPU model did not change the key")
	}
	if err := os.WriteFile(files[1], []byte("a rebuilt kernel"), 0o644); err != nil {
		t.Fatal(err)
	}
	if key(cfg(nil)) == k0 {
		t.Error("a rebuilt kernel did not change the key")
	}
}

func TestPruneSnapshots(t *testing.T) {
	dir := t.TempDir()
	old, fresh := filepath.Join(dir, "old.snap"), filepath.Join(dir, "fresh.snap")
	for _, p := range []string{old, fresh, filepath.Join(dir, "old.lock")} {
		if err := os.WriteFile(p, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	then := time.Now().Add(-8 * 24 * time.Hour)
	os.Chtimes(old, then, then)
	pruneSnapshots(dir, snapMaxIdle)
	left, _ := filepath.Glob(filepath.Join(dir, "*"))
	if len(left) != 1 || left[0] != fresh {
		t.Fatalf("left %v, want only %s", left, fresh)
	}
}

// TestSnapshotFailureRemembered: a snapshot that cannot be made is recorded with its
// reason, and the next runs of the key boot cold at once instead of paying another
// snapshot boot each; a marker older than snapRetryFailed is tried again.
func TestSnapshotFailureRemembered(t *testing.T) {
	dir := t.TempDir()
	starts := filepath.Join(dir, "starts")
	qemu := filepath.Join(dir, "qemu")
	// A QEMU that dies at once, the way a host that cannot run the snapshot guest does.
	script := "#!/bin/sh\necho started >> " + starts + "\necho 'qemu: could not load PC BIOS' >&2\nexit 1\n"
	if err := os.WriteFile(qemu, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"vmlinux", "initrd"} {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := &plan{machine: MachineMicrovm, cpus: 1, memMiB: 256}
	st := vmStart{qemu: qemu, kernel: filepath.Join(dir, "vmlinux"), initrd: filepath.Join(dir, "initrd"),
		accel: AccelTCG, append: "console=ttyS0"}
	sr, err := newSnapRun(p, st, filepath.Join(dir, "cache"), filepath.Join(dir, "run"), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	runs := func() int {
		b, _ := os.ReadFile(starts)
		return strings.Count(string(b), "started")
	}
	if _, _, err := sr.ensure(ctx); err == nil || errors.Is(err, errSnapFailedBefore) {
		t.Fatalf("first ensure: %v, want the make failure", err)
	}
	mark, err := os.ReadFile(sr.failedPath())
	// The reason is QEMU's own words, or the words of whatever starts it (a vmm jail).
	if err != nil || !strings.Contains(string(mark), "qemu exited during start") {
		t.Fatalf("failure marker %q, %v: want the reason the start failed", mark, err)
	}
	started := runs()
	for i := 0; i < 2; i++ {
		if _, _, err := sr.ensure(ctx); !errors.Is(err, errSnapFailedBefore) || !strings.Contains(err.Error(), "qemu exited during start") {
			t.Fatalf("ensure after a failure: %v, want errSnapFailedBefore with the reason", err)
		}
	}
	if n := runs(); n != started {
		t.Fatalf("qemu started %d more times: later runs must not retry", n-started)
	}
	old := time.Now().Add(-snapRetryFailed - time.Minute)
	os.Chtimes(sr.failedPath(), old, old)
	if _, _, err := sr.ensure(ctx); err == nil || errors.Is(err, errSnapFailedBefore) {
		t.Fatalf("ensure after the marker expired: %v, want a new attempt", err)
	}

	// A cancelled run says nothing about the key.
	os.Remove(sr.failedPath())
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	sr.markFailed(cctx, context.Canceled)
	if _, err := os.Stat(sr.failedPath()); err == nil {
		t.Fatal("a cancelled run left a failure marker")
	}
}
