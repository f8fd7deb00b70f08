package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/initramfs"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/netjail"
)

func init() {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what crackbox run needs on this machine and say how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			if bad := doctor(cmd.OutOrStdout(), cfg.Run.Kernel, cfg.Run.GuestInit, cfg.Run.Accel, cfg.Run.Net); bad > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	addConfigFlag(cmd)
	root.AddCommand(cmd)
}

// lineFunc prints one check: ok, whether it is required, what, the detail and a fix.
type lineFunc func(ok, required bool, what, detail, fix string)

// printLine prints checks as "ok", "warn" or "FAIL" lines with their fix, counting the
// failed required ones in bad.
func printLine(w io.Writer, bad *int) lineFunc {
	return func(ok, required bool, what, detail, fix string) {
		mark := "ok  "
		if !ok {
			mark = "warn"
			if required {
				mark = "FAIL"
				*bad++
			}
		}
		fmt.Fprintf(w, "%s %-14s %s\n", mark, what, detail)
		if !ok && fix != "" {
			fmt.Fprintf(w, "     %-14s fix: %s\n", "", fix)
		}
	}
}

// doctor prints one line per check and returns how many required pieces are missing.
func doctor(w io.Writer, kernel, guestInit, accel, netMode string) int {
	bad := 0
	line := printLine(w, &bad)
	doctorAccel(line, accel, jail.ProbeHost())
	doctorVMMJail(line, os.Geteuid())

	if q, err := jail.FindQEMU(); err != nil {
		line(false, true, "qemu", err.Error(), "apt-get install qemu-system-x86")
	} else {
		out, _ := exec.Command(q, "--version").Output()
		v, _, _ := strings.Cut(string(out), "\n")
		line(true, true, "qemu", q+": "+v, "")
	}

	cache := jail.CacheDir()
	if k, err := jail.FindKernel(kernel, cache); err != nil {
		line(false, true, "kernel", err.Error(), "make kernel (guestfs/kernel/build.sh)")
	} else {
		line(true, true, "kernel", k, "")
	}

	if gi, err := jail.FindGuestInit(guestInit); err != nil {
		line(false, true, "guest-init", err.Error(), "make guest-init, then put bin/guest-init next to crackbox or set CRACKBOX_GUEST_INIT")
	} else {
		line(true, true, "guest-init", gi, "")
		if p, err := initramfs.Ensure(gi, cache); err != nil {
			line(false, true, "initramfs", err.Error(), "check that "+cache+" is writable")
		} else {
			line(true, true, "initramfs", p, "")
		}
	}

	if f, err := os.OpenFile("/dev/vhost-vsock", os.O_RDWR, 0); err != nil {
		line(false, false, "vhost-vsock", err.Error()+"; the control channel uses virtio-serial instead", "modprobe vhost_vsock (optional)")
	} else {
		f.Close()
		line(true, false, "vhost-vsock", "/dev/vhost-vsock usable", "")
	}

	mode, why, err := netModeReason(netMode)
	netFix := ""
	if mode != jail.NetTap {
		netFix = "run crackbox as root (sudo) for tap networking, where nftables confines every packet"
	}
	line(err == nil && mode == jail.NetTap, err != nil, "network", why, netFix)

	snaps, _ := filepath.Glob(filepath.Join(cache, "snapshots", "*.snap"))
	snapDetail := fmt.Sprintf("%d saved in %s; a run restores one when its devices fit the snapshot layout (made on the first such run)", len(snaps), filepath.Join(cache, "snapshots"))
	if os.Geteuid() == 0 && os.Getenv("SUDO_UID") == "" {
		snapDetail += "; as plain root a work directory is served by virtiofsd, which boots cold"
	}
	line(true, false, "snapshots", snapDetail, "")

	if _, err := os.Stat(jail.VirtiofsdPath); err != nil {
		req := os.Geteuid() == 0
		line(false, req, "virtiofsd", jail.VirtiofsdPath+" missing: as root, shares need it", "apt-get install qemu-system-common")
	} else {
		line(true, false, "virtiofsd", jail.VirtiofsdPath, "")
	}
	return bad
}

// doctorAccel reports the accelerator a run would use; the /dev/kvm check is the one
// Run makes, for the user QEMU runs as, and its fix names the cause.
func doctorAccel(line lineFunc, accel string, probe jail.HostProbe) {
	acc, why, err := jail.ChooseAccel(accel, probe)
	if err != nil {
		fix := "use --accel auto or tcg"
		if probe.KVMFix != "" {
			fix = probe.KVMFix + "; or " + fix
		}
		line(false, true, "accelerator", err.Error(), fix)
		return
	}
	fix := ""
	switch {
	case acc == jail.AccelKVM:
	case !probe.KVMOpens && probe.KVMFix != "":
		fix = "guests run under TCG (slow); " + probe.KVMFix
	default:
		fix = "guests run under TCG (slow); load kvm_intel/kvm_amd on a host with hardware virtualisation for KVM"
	}
	line(acc == jail.AccelKVM, false, "accelerator", why, fix)
}

// doctorVMMJail says how QEMU will be confined: its namespaces and its cgroup leaf.
func doctorVMMJail(line lineFunc, euid int) {
	if euid != 0 {
		line(false, false, "vmm jail", jail.ErrNoVMMJail.Error(), "run crackbox as root (sudo) to jail QEMU")
	} else {
		line(true, false, "vmm jail", "QEMU runs as a uid of its own per run, in its own mount, pid, ipc, uts and network namespaces", "")
	}
	if v2, err := jail.CgroupSupportFor(euid); err != nil {
		line(false, false, "vmm cgroup", err.Error(), "run as root on a host with cgroup v2 (or v1 memory, pids and cpu hierarchies)")
	} else {
		kind := "v1"
		if v2 {
			kind = "v2"
		}
		line(true, false, "vmm cgroup", "cgroup "+kind+" leaf per run: memory (guest RAM + overhead), pids and cpu weight", "")
	}
}

// netModeReason says which network mode crackbox run would use for the configured
// run.net and why.
func netModeReason(configured string) (mode, why string, err error) {
	avail := netjail.Available()
	switch configured {
	case "", netjail.ModeAuto:
		if avail == nil {
			return jail.NetTap, "auto -> tap: CAP_NET_ADMIN held, the guest gets a tap confined by nftables", nil
		}
		return jail.NetProxyOnly, "auto -> proxy-only (no NIC; proxy-aware clients only): " + avail.Error(), nil
	case jail.NetTap:
		if avail != nil {
			return "", "tap (run.net) is not possible: " + avail.Error(), avail
		}
		return jail.NetTap, "tap (run.net): CAP_NET_ADMIN held", nil
	case jail.NetProxyOnly, "user":
		return jail.NetProxyOnly, "proxy-only (run.net): no NIC; proxy-aware clients only", nil
	case jail.NetNone:
		return jail.NetNone, "none (run.net): loopback only", nil
	}
	return "", fmt.Sprintf("run.net %q is not a network mode", configured), fmt.Errorf("bad run.net")
}
