package jail

import (
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/initramfs"
)

func TestTmpSmoke(t *testing.T) {
	if os.Getenv("TMPSMOKE") == "" {
		t.Skip()
	}
	initrd, err := initramfs.Ensure("/tmp/dinit/dinit", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kernel, _ := FindKernel("", CacheDir())
	w := t.TempDir()
	os.Chmod(w, 0o777)
	p := &plan{machine: MachineMicrovm, cpus: 1, memMiB: 256,
		lowers:    hostViewShares(),
		userShare: []share{{Tag: "v0", Host: w, Target: w, FS: FSVirtiofs}}}
	vmm := pickVMMIdentity(0, -1)
	rd, err := newRunDir(runDirBase(""), vmm)
	
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	v, err := startVM(p, vmStart{qemu: "qemu-system-x86_64", kernel: kernel, initrd: initrd, accel: AccelTCG, vmm: vmm,
		append: kernelCmdline(AccelTCG, MachineMicrovm, tscKHz(), true)}, rd, log)
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.acceptCtl(10 * time.Second)
	t.Log("accept", c, err)
	v.qmp, err = dialQMP(rd.vmPath("qmp.sock"), 5*time.Second)
	t.Log("qmp", err)
	if v.qmp != nil {
		t.Log(v.qmp.status(time.Second))
	}
	v.waitExit(60 * time.Second)
	t.Log("exit", v.waitErr, time.Since(v.started))
	v.shutdown(0)
	b, _ := os.ReadFile(rd.path("console.log"))
	t.Logf("console:\n%s", b)
	b, _ = os.ReadFile(rd.path("qemu.log"))
	t.Logf("qemu.log:\n%s", b)
	st, err := os.Stat(w + "/hello.txt")
	if err == nil {
		t.Log("hello owner", st.Sys())
	}
}
