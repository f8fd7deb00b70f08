package jail

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// Machine types.
const (
	MachineMicrovm = "microvm"
	MachineQ35     = "q35"
)

// sandboxOpt is QEMU's seccomp policy: no obsolete syscalls, no setuid/setgid, no
// fork/exec, no affinity or priority changes.
const sandboxOpt = "on,obsolete=deny,elevateprivileges=deny,spawn=deny,resourcecontrol=deny"

// vmConfig is everything the QEMU command line is built from.
type vmConfig struct {
	Machine   string
	Accel     string
	CPUs      int
	MemoryMiB int
	Kernel    string // as QEMU opens it, e.g. /dev/fd/3
	Initrd    string
	SwapDisk  string // as QEMU opens it, e.g. /dev/fd/5 (swapdisk.go)
	Append    string
	CtlSock   string // host listens, QEMU connects
	QMPSock   string // QEMU listens
	// SharePorts are the sockets QEMU listens on for the share ports, one per
	// sharePortCount; the host connects the ones a run uses (shareport.go).
	SharePorts []string
	Shares     []vmShare
	TapName    string
	TapFD      int // > 0: an inherited tap fd
	// FixedNIC: the snapshot layout, which always has a virtio-net device with a fixed
	// MAC; without a tap its backend is a hub port alone on its hub, which carries
	// nothing anywhere (never -netdev user).
	FixedNIC bool
	// Incoming, when set, starts QEMU waiting for a migration stream (a snapshot), e.g.
	// fd:5 for an inherited file.
	Incoming string
}

// newVMConfig is the part of the command line that a snapshot's key covers, built the
// same way for a boot, a snapshot and its key (snapKey): QEMU opens the kernel and
// initramfs as inherited files 3 and 4, and a snapshot layout fixes shares and NIC.
func newVMConfig(p *plan, st vmStart) vmConfig {
	cfg := vmConfig{
		Machine: p.machine, Accel: st.accel, CPUs: p.cpus, MemoryMiB: p.memMiB,
		Kernel: "/dev/fd/3", Initrd: "/dev/fd/4", Append: st.append,
		SwapDisk: "/dev/fd/" + strconv.Itoa(swapFD),
	}
	for i := range sharePortCount {
		cfg.SharePorts = append(cfg.SharePorts, sharePortName(i))
	}
	if p.modular {
		// The cloud kernel's virtio-fs workdir is live (debkernel.go) and its initramfs
		// loads no virtio_blk: the guest keeps the device set it always had.
		cfg.SwapDisk = ""
	}
	if st.layout != nil {
		cfg.Shares, cfg.FixedNIC = st.layout, true
	}
	return cfg
}

// vmShare is a share as QEMU sees it: a directory for 9p, a vhost-user socket for virtiofs.
type vmShare struct {
	share
	Sock string
}

// cpuModel is the guest CPU for an accelerator. KVM passes the host CPU through. Under
// TCG QEMU's default model has neither SSE4.2, POPCNT nor AVX2, so binaries built for
// x86-64-v2/v3 (Bun-compiled CLIs such as Claude Code, many wheels) die with SIGILL;
// "max" is everything TCG emulates. Its migratable default drops what a snapshot could
// not carry, and a snapshot is only restored by the QEMU binary that made it.
func cpuModel(accel string) string {
	if accel == AccelKVM {
		return "host"
	}
	return "max"
}

// kernelCmdline is the guest kernel command line.
func kernelCmdline(accel, machine string, khz int, debug bool) string {
	parts := []string{"console=ttyS0", "reboot=t", "panic=-1", "8250.nr_uarts=1",
		"init_on_alloc=0", "mitigations=off", "cryptomgr.notests", "random.trust_cpu=on",
		"crackbox.ctl=virtio-serial"}
	if debug {
		// guest-init then logs each step of the session to the console.
		parts = append(parts, "crackbox.debug")
	} else {
		parts = append(parts, "quiet")
	}
	if accel == AccelTCG {
		// Without it microvm under TCG hangs after "Marking TSC unstable".
		parts = append(parts, "tsc_early_khz="+strconv.Itoa(khz), "tsc=reliable")
		// TCG offers no TSC-deadline timer, so the kernel would spend 100 ms of jiffies
		// calibrating the local APIC timer (~0.2 s of boot here); the PIT ticks instead.
		parts = append(parts, "nolapic_timer")
	}
	if machine == MachineQ35 {
		parts = append(parts, "pci=noacpi")
	}
	return strings.Join(parts, " ")
}

// dev names a virtio device for the machine's transport.
func (c vmConfig) dev(base string) string {
	if c.Machine == MachineQ35 {
		return base + "-pci"
	}
	return base + "-device"
}

func (c vmConfig) args() []string {
	a := []string{"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-sandbox", sandboxOpt}
	if c.Accel == AccelKVM {
		a = append(a, "-accel", "kvm", "-cpu", cpuModel(c.Accel))
	} else {
		a = append(a, "-accel", "tcg,tb-size=32", "-cpu", cpuModel(c.Accel))
	}
	usesVirtiofs := false
	for _, s := range c.Shares {
		if s.FS == FSVirtiofs {
			usesVirtiofs = true
		}
	}
	machine := "microvm,pit=on,pic=on,rtc=on,acpi=off,x-option-roms=off"
	if c.Machine == MachineQ35 {
		machine = "q35"
	}
	if usesVirtiofs {
		// vhost-user needs guest RAM the daemon can map.
		a = append(a, "-object", fmt.Sprintf("memory-backend-memfd,id=mem,size=%dM,share=on", c.MemoryMiB))
		machine += ",memory-backend=mem"
	}
	a = append(a, "-M", machine)
	if c.Machine != MachineQ35 {
		// vhost-user devices need modern virtio-mmio.
		a = append(a, "-global", "virtio-mmio.force-legacy=false")
	}
	a = append(a,
		"-m", strconv.Itoa(c.MemoryMiB),
		"-smp", strconv.Itoa(c.CPUs),
		"-kernel", c.Kernel,
		"-initrd", c.Initrd,
		"-append", c.Append,
		// The console goes to QEMU's stdout, which the host points at console.log.
		"-chardev", "stdio,id=con,signal=off",
		"-serial", "chardev:con",
		"-chardev", "socket,id=qmp,path="+c.QMPSock+",server=on,wait=off",
		"-mon", "chardev=qmp,mode=control",
		"-device", c.dev("virtio-rng"),
		"-device", c.dev("virtio-serial")+",id=vser",
		"-chardev", "socket,id=ctl,path="+c.CtlSock,
		"-device", "virtserialport,bus=vser.0,chardev=ctl,name=ctl",
	)
	for i, sock := range c.SharePorts {
		name := sharePortName(i)
		a = append(a,
			"-chardev", "socket,id="+name+",path="+sock+",server=on,wait=off",
			"-device", "virtserialport,bus=vser.0,chardev="+name+",name="+name)
	}
	if c.SwapDisk != "" {
		// Its contents die with the run, so nothing is flushed; discards punch holes.
		a = append(a,
			"-drive", "file="+c.SwapDisk+",format=raw,if=none,id=swap,cache=unsafe,discard=unmap",
			"-device", c.dev("virtio-blk")+",drive=swap,serial="+control.SwapSerial)
	}
	for i, s := range c.Shares {
		id := "fs" + strconv.Itoa(i)
		switch s.FS {
		case FSVirtiofs:
			a = append(a,
				"-chardev", "socket,id="+id+",path="+s.Sock,
				"-device", c.dev("vhost-user-fs")+",chardev="+id+",tag="+s.Tag)
		default:
			opt := "local,id=" + id + ",path=" + s.Host + ",security_model=none"
			if s.ReadOnly {
				opt += ",readonly=on"
			}
			a = append(a, "-fsdev", opt, "-device", c.dev("virtio-9p")+",fsdev="+id+",mount_tag="+s.Tag)
		}
	}
	nic := c.dev("virtio-net") + ",netdev=n0"
	if c.FixedNIC {
		nic += ",mac=" + snapMAC
	}
	switch {
	case c.TapFD > 0:
		a = append(a, "-netdev", "tap,id=n0,fd="+strconv.Itoa(c.TapFD), "-device", nic)
	case c.TapName != "":
		a = append(a, "-netdev", "tap,id=n0,ifname="+c.TapName+",script=no,downscript=no", "-device", nic)
	case c.FixedNIC:
		a = append(a, "-netdev", "hubport,id=n0,hubid=0", "-device", nic)
	}
	if c.Incoming != "" {
		a = append(a, "-incoming", c.Incoming)
	}
	return a
}

// qemuPathOK rejects paths QEMU's option parser would split (it uses commas).
func qemuPathOK(p string) error {
	if strings.ContainsAny(p, ",\n") {
		return fmt.Errorf("%w: path %q contains a comma or newline, which QEMU options cannot carry; rename it", ErrBadSpec, p)
	}
	return nil
}
