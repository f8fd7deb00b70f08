package main

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/initramfs"
	"github.com/crackbox/crackbox/pkg/jail"
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
			if bad := doctor(cmd.OutOrStdout(), cfg.Run.Kernel, cfg.Run.GuestInit, cfg.Run.Accel); bad > 0 {
				return exitError{1}
			}
			return nil
		},
	}
	addConfigFlag(cmd)
	root.AddCommand(cmd)
}

// doctor prints one line per check and returns how many required pieces are missing.
func doctor(w io.Writer, kernel, guestInit, accel string) int {
	bad := 0
	line := func(ok bool, required bool, what, detail, fix string) {
		mark := "ok  "
		if !ok {
			mark = "warn"
			if required {
				mark = "FAIL"
				bad++
			}
		}
		fmt.Fprintf(w, "%s %-14s %s\n", mark, what, detail)
		if !ok && fix != "" {
			fmt.Fprintf(w, "     %-14s fix: %s\n", "", fix)
		}
	}

	probe := jail.ProbeHost()
	if acc, why, err := jail.ChooseAccel(accel, probe); err != nil {
		line(false, true, "accelerator", err.Error(), "use --accel auto or tcg")
	} else {
		fix := ""
		if acc == jail.AccelTCG {
			fix = "guests run under TCG (slow); load kvm_intel/kvm_amd on a host with hardware virtualisation for KVM"
		}
		line(acc == jail.AccelKVM, false, "accelerator", why, fix)
	}

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

	if hasCap(12) { // CAP_NET_ADMIN
		line(true, false, "net-admin", "CAP_NET_ADMIN held: tap networking possible", "")
	} else {
		line(false, false, "net-admin", "no CAP_NET_ADMIN: only --net none works", "run crackbox as root (sudo) for tap networking")
	}

	if _, err := os.Stat(jail.VirtiofsdPath); err != nil {
		req := os.Geteuid() == 0
		line(false, req, "virtiofsd", jail.VirtiofsdPath+" missing: as root, shares need it", "apt-get install qemu-system-common")
	} else {
		line(true, false, "virtiofsd", jail.VirtiofsdPath, "")
	}
	return bad
}

// hasCap reports whether the effective capability set holds capability bit n.
func hasCap(n uint) bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && m&(1<<n) != 0
		}
	}
	return false
}
