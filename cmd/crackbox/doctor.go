package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/host"
	"github.com/crackbox/crackbox/pkg/jail/initramfs"
	"github.com/crackbox/crackbox/pkg/jail/install"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// newDoctorCmd builds crackbox doctor.
func newDoctorCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check what crackbox run needs on this machine and say how to fix what is missing",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, _, err := loadConfig(cmd, nil)
			if err != nil {
				return err
			}
			checks := doctorChecks(cfg.Run)
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(checks); err != nil {
					return err
				}
			} else {
				writeChecks(cmd.OutOrStdout(), checks)
			}
			if failed(checks) > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	addConfigFlag(cmd)
	cmd.Flags().Bool("json", false, "print the checks as a JSON array (status ok, warn or fail; what; detail; fix)")
	return cmd
}

// check is one line of doctor's report.
type check struct {
	Status string `json:"status"` // ok, warn or fail
	What   string `json:"what"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

func failed(cs []check) int {
	n := 0
	for _, c := range cs {
		if c.Status == "fail" {
			n++
		}
	}
	return n
}

func writeChecks(w io.Writer, cs []check) {
	marks := map[string]string{"ok": "ok  ", "warn": "warn", "fail": "FAIL"}
	for _, c := range cs {
		fmt.Fprintf(w, "%s %-14s %s\n", marks[c.Status], c.What, c.Detail)
		if c.Fix != "" {
			fmt.Fprintf(w, "     %-14s fix: %s\n", "", c.Fix)
		}
	}
}

// doctor prints one line per check and returns how many required pieces are missing.
func doctor(w io.Writer, r config.Run) int {
	cs := doctorChecks(r)
	writeChecks(w, cs)
	return failed(cs)
}

// lineFunc records one check: ok, whether it is required, what, the detail and a fix.
type lineFunc func(ok, required bool, what, detail, fix string)

// collect returns a lineFunc appending to out: warn when not ok, fail when also required.
func collect(out *[]check) lineFunc {
	return func(ok, required bool, what, detail, fix string) {
		c := check{Status: "ok", What: what, Detail: detail}
		if !ok {
			c.Status, c.Fix = "warn", fix
			if required {
				c.Status = "fail"
			}
		}
		*out = append(*out, c)
	}
}

// doctorChecks runs every check: what crackbox run needs and how to fix what is missing.
func doctorChecks(r config.Run) []check {
	var out []check
	line := collect(&out)
	doctorAccel(line, r.Accel, host.Probe())
	doctorVMMJail(line, os.Geteuid())

	if q, err := install.FindQEMU(); err != nil {
		line(false, true, "qemu", err.Error(), "apt-get install qemu-system-x86")
	} else {
		out, _ := exec.Command(q, "--version").Output()
		v, _, _ := strings.Cut(string(out), "\n")
		line(true, true, "qemu", q+": "+v, "")
	}

	cache := cacheDir(r)
	if k, err := install.FindKernel(r.Kernel, cache); err != nil {
		line(false, true, "kernel", err.Error(), "make kernel (guestfs/kernel/build.sh)")
	} else {
		line(true, true, "kernel", k, "")
	}

	if gi, err := install.FindGuestInit(r.GuestInit); err != nil {
		line(false, true, "guest-init", err.Error(), "make guest-init, then put bin/guest-init next to crackbox or set CRACKBOX_GUEST_INIT")
	} else {
		line(true, true, "guest-init", gi, "")
		if p, err := initramfs.Ensure(gi, cache); err != nil {
			line(false, true, "initramfs", err.Error(), "check that "+cache+" is writable")
		} else {
			line(true, true, "initramfs", p, "")
		}
	}

	// The host side speaks virtio-serial only; guest-init's vsock dialer has no peer.
	line(true, false, "control", "yamux over virtio-serial (vsock is not used)", "")

	base := rundir.DefaultBase()
	if note, err := rundir.CheckBase(base); err != nil {
		line(false, true, "run dir", err.Error(), "rm -rf "+base+" (crackbox recreates it), or set "+rundir.BaseEnv)
	} else if note != "" {
		line(true, true, "run dir", note, "")
	} else {
		line(true, true, "run dir", base, "")
	}

	mode, why, err := netModeReason(r.Net)
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

	if _, err := os.Stat(install.Virtiofsd); err != nil {
		req := os.Geteuid() == 0
		line(false, req, "virtiofsd", install.Virtiofsd+" missing: as root, shares need it", "apt-get install qemu-system-common")
	} else {
		line(true, false, "virtiofsd", install.Virtiofsd, "")
	}
	return out
}

// doctorAccel reports the accelerator a run would use; the /dev/kvm check is the one
// Run makes, for the user QEMU runs as, and its fix names the cause.
func doctorAccel(line lineFunc, accel string, probe host.Facts) {
	acc, why, err := host.ChooseAccel(accel, probe)
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
	} else if err := host.VMMJailKernel(); err != nil {
		line(false, true, "vmm jail", err.Error(), "upgrade the host kernel to Linux 5.8 or later")
	} else {
		line(true, false, "vmm jail", "QEMU runs as a uid of its own per run, in its own mount, pid, ipc, uts and network namespaces", "")
	}
	if v2, err := host.CgroupSupport(euid); err != nil {
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
	switch jail.CanonicalNet(configured) {
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
	case jail.NetProxyOnly:
		return jail.NetProxyOnly, "proxy-only (run.net): no NIC; proxy-aware clients only", nil
	case jail.NetNone:
		return jail.NetNone, "none (run.net): loopback only", nil
	}
	return "", fmt.Sprintf("run.net %q is not a network mode", configured), fmt.Errorf("bad run.net")
}
