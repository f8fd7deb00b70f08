package jail

import (
	"fmt"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail/host"
)

func TestQEMUArgs(t *testing.T) {
	base := vmConfig{
		Machine: MachineMicrovm, Accel: AccelTCG, CPUs: 2, MemoryMiB: 256,
		Kernel: "/dev/fd/3", Initrd: "/dev/fd/4", SwapDisk: "/dev/fd/5", Append: "console=ttyS0",
		CtlSock: "/run/x/vm/ctl.sock", QMPSock: "/run/x/vm/qmp.sock",
		Shares: []vmShare{
			{share: share{Tag: "usr", Host: "/usr", Target: "/usr", ReadOnly: true, FS: FS9P}},
			{share: share{Tag: "v0", Host: "/w", Target: "/w", FS: FSVirtiofs}, Sock: "/run/x/vm/fs0.sock"},
		},
	}
	cases := []struct {
		name    string
		mod     func(*vmConfig)
		want    []string
		notWant []string
	}{
		{"microvm tcg", func(*vmConfig) {}, []string{
			"-nodefaults", "-no-user-config", "-no-reboot", "-display none",
			"-sandbox on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny",
			"-accel tcg,tb-size=32 -cpu max",
			"-M microvm,pit=on,pic=on,rtc=on,acpi=off,x-option-roms=off,memory-backend=mem",
			"-object memory-backend-memfd,id=mem,size=256M,share=on",
			"-global virtio-mmio.force-legacy=false",
			"-m 256", "-smp 2", "-kernel /dev/fd/3", "-initrd /dev/fd/4",
			"-device virtio-rng-device",
			"-device virtio-serial-device,id=vser",
			"-chardev socket,id=ctl,path=/run/x/vm/ctl.sock",
			"-device virtserialport,bus=vser.0,chardev=ctl,name=ctl",
			"-chardev socket,id=qmp,path=/run/x/vm/qmp.sock,server=on,wait=off",
			"-fsdev local,id=fs0,path=/usr,security_model=none,readonly=on",
			"-device virtio-9p-device,fsdev=fs0,mount_tag=usr",
			"-chardev socket,id=fs1,path=/run/x/vm/fs0.sock",
			"-device vhost-user-fs-device,chardev=fs1,tag=v0",
			"-drive file=/dev/fd/5,format=raw,if=none,id=swap,cache=unsafe,discard=unmap -device virtio-blk-device,drive=swap,serial=crackbox-swap",
		}, []string{"-cpu host", "-netdev"}},
		{"kvm", func(c *vmConfig) { c.Accel = AccelKVM }, []string{"-accel kvm -cpu host"}, []string{"tcg", "-cpu max"}},
		{"q35 uses pci devices", func(c *vmConfig) { c.Machine = MachineQ35 }, []string{
			"-M q35,memory-backend=mem", "-device virtio-serial-pci,id=vser", "-device virtio-rng-pci",
			"-device virtio-9p-pci,fsdev=fs0", "-device vhost-user-fs-pci,chardev=fs1",
			"-device virtio-blk-pci,drive=swap",
		}, []string{"microvm", "force-legacy"}},
		{"9p only needs no memfd", func(c *vmConfig) { c.Shares = c.Shares[:1] }, []string{
			"-M microvm,pit=on,pic=on,rtc=on,acpi=off,x-option-roms=off -global",
		}, []string{"memory-backend"}},
		{"tap by name", func(c *vmConfig) { c.TapName = "cb0" }, []string{
			"-netdev tap,id=n0,ifname=cb0,script=no,downscript=no -device virtio-net-device,netdev=n0",
		}, nil},
		{"tap by fd", func(c *vmConfig) { c.TapFD = 5 }, []string{
			"-netdev tap,id=n0,fd=5 -device virtio-net-device,netdev=n0",
		}, []string{"ifname"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := base
			cfg.Shares = append([]vmShare(nil), base.Shares...)
			c.mod(&cfg)
			line := strings.Join(cfg.args(), " ")
			for _, w := range c.want {
				if !strings.Contains(line, w) {
					t.Errorf("args lack %q:\n%s", w, line)
				}
			}
			for _, w := range c.notWant {
				if strings.Contains(line, w) {
					t.Errorf("args contain %q:\n%s", w, line)
				}
			}
		})
	}
}

func TestKernelCmdline(t *testing.T) {
	tcg := kernelCmdline(AccelTCG, MachineMicrovm, 2300000, false)
	for _, w := range []string{"console=ttyS0", "panic=-1", "reboot=t", "tsc_early_khz=2300000", "quiet", "crackbox.ctl=virtio-serial"} {
		if !strings.Contains(tcg, w) {
			t.Errorf("tcg cmdline lacks %q: %s", w, tcg)
		}
	}
	kvm := kernelCmdline(AccelKVM, MachineMicrovm, 2300000, true)
	if strings.Contains(kvm, "tsc_early_khz") || strings.Contains(kvm, "quiet") {
		t.Errorf("kvm debug cmdline: %s", kvm)
	}
}

func TestPickVMM(t *testing.T) {
	alice := User{UID: 1000, GID: 1000}
	root := User{UID: 0, GID: 0}
	cases := []struct {
		name   string
		euid   int
		inv    User
		kvm    int
		id     *vmmIdentity
		userFS string
	}{
		{"unprivileged keeps itself", 1000, alice, -1, nil, FSStream},
		{"sudo drops to a uid of the run's own", 0, alice, -1, &vmmIdentity{UID: host.VMMUIDBase, GID: host.VMMUIDBase, PerRun: true}, FSStream},
		{"sudo with kvm adds the device's group", 0, alice, 108, &vmmIdentity{UID: host.VMMUIDBase, GID: host.VMMUIDBase, Groups: []uint32{108}, PerRun: true}, FSStream},
		{"plain root drops to a uid of the run's own", 0, root, -1, &vmmIdentity{UID: host.VMMUIDBase, GID: host.VMMUIDBase, PerRun: true}, FSStream},
		{"plain root with kvm adds the device's group", 0, root, 36, &vmmIdentity{UID: host.VMMUIDBase, GID: host.VMMUIDBase, Groups: []uint32{36}, PerRun: true}, FSStream},
	}
	for _, c := range cases {
		got := pickVMM(c.euid, c.inv, c.kvm)
		if got.UserFS != c.userFS || (got.ID == nil) != (c.id == nil) ||
			(got.ID != nil && (got.ID.UID != c.id.UID || got.ID.GID != c.id.GID || got.ID.PerRun != c.id.PerRun || fmt.Sprint(got.ID.Groups) != fmt.Sprint(c.id.Groups))) {
			t.Errorf("%s: pickVMM = %+v (id %+v), want id %+v fs %s", c.name, got, got.ID, c.id, c.userFS)
		}
	}
}

func TestMakePlan(t *testing.T) {
	wd := t.TempDir()
	p, err := makePlan(Spec{Argv: []string{"ls"}, Workdir: wd, Volumes: []Volume{{Host: wd, Guest: "/data", ReadOnly: true}},
		User: &User{UID: 1000, GID: 1000, Home: "/home/u"}, Env: []string{"A=b"}}, FSVirtiofs)
	if err != nil {
		t.Fatal(err)
	}
	rs := p.rs
	if rs.Dir != wd || rs.UID != 1000 || rs.GID != 1000 || rs.Root.Mode != "hostview" || rs.Net.Mode != NetNone {
		t.Fatalf("runspec %+v", rs)
	}
	if len(rs.Mounts) != 2 || rs.Mounts[0].Target != wd || rs.Mounts[0].FSType != FSVirtiofs || rs.Mounts[0].ReadOnly ||
		rs.Mounts[1].Target != "/data" || !rs.Mounts[1].ReadOnly || rs.Mounts[0].Tag == rs.Mounts[1].Tag {
		t.Fatalf("mounts %+v", rs.Mounts)
	}
	for _, l := range rs.Root.Lower {
		if !l.ReadOnly || (l.Target != "/usr" && l.Target != "/etc" && l.Target != "/opt") {
			t.Fatalf("host view lower %+v", l)
		}
	}
	if !strings.Contains(strings.Join(rs.Env, " "), "HOME=/home/u") {
		t.Fatalf("env %q", rs.Env)
	}

	p, err = makePlan(Spec{Argv: []string{"id"}, Root: true}, FS9P)
	if err != nil || p.rs.UID != 0 || p.rs.Dir != "/root" {
		t.Fatalf("root plan: %+v %v", p, err)
	}

	for name, s := range map[string]Spec{
		"no argv":        {},
		"bad machine":    {Argv: []string{"x"}, Machine: "pc"},
		"tiny memory":    {Argv: []string{"x"}, MemoryMiB: 8},
		"same target":    {Argv: []string{"x"}, Volumes: []Volume{{Host: wd, Guest: "/d"}, {Host: wd, Guest: "/d"}}},
		"bad net":        {Argv: []string{"x"}, Net: Net{Mode: "bridge"}},
		"tap without it": {Argv: []string{"x"}, Net: Net{Mode: NetTap}},
		"relative dir":   {Argv: []string{"x"}, Dir: "rel"},
	} {
		if _, err := makePlan(s, FS9P); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
