package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/host"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
)

func TestDoctorNamesMissingPieces(t *testing.T) {
	var out bytes.Buffer
	bad := doctor(&out, config.Run{Kernel: "/nonexistent/vmlinux", GuestInit: "/nonexistent/guest-init", Accel: "auto", Net: "auto"})
	text := out.String()
	if bad < 2 {
		t.Fatalf("doctor counted %d missing pieces, want at least kernel and guest-init:\n%s", bad, text)
	}
	for _, want := range []string{
		"FAIL kernel", "/nonexistent/vmlinux", "make kernel",
		"FAIL guest-init", "make guest-init",
		"accelerator", "qemu", "control", "virtio-serial", "network", "virtiofsd",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, text)
		}
	}
}

func TestNetModeReason(t *testing.T) {
	tapOK := netjail.Available() == nil
	auto := jail.NetProxyOnly
	if tapOK {
		auto = jail.NetTap
	}
	for _, c := range []struct {
		configured, mode string
		bad              bool
	}{
		{"auto", auto, false},
		{"", auto, false},
		{"proxy-only", jail.NetProxyOnly, false},
		{"user", jail.NetProxyOnly, false},
		{"none", jail.NetNone, false},
		{"bogus", "", true},
	} {
		mode, why, err := netModeReason(c.configured)
		if mode != c.mode || (err != nil) != c.bad || why == "" {
			t.Errorf("netModeReason(%q) = %q, %q, %v; want mode %q bad %v", c.configured, mode, why, err, c.mode, c.bad)
		}
	}
	mode, _, err := netModeReason("tap")
	if tapOK != (err == nil) || tapOK != (mode == jail.NetTap) {
		t.Errorf("netModeReason(tap) = %q, %v with tap available=%v", mode, err, tapOK)
	}
}

// TestDoctorKVMAdvice: doctor's accelerator line and fix for each /dev/kvm case, from
// the same check Run makes for QEMU's user.
func TestDoctorKVMAdvice(t *testing.T) {
	kvm := &host.DevStat{UID: 0, GID: 108, Perm: 0o660, Group: "kvm"}
	user := host.KVMUser{UID: 1000, GID: 1000}
	relogin := host.KVMUser{UID: 1000, GID: 1000, Listed: []uint32{108}}
	asRoot := host.KVMUser{UID: host.VMMUIDBase, GID: host.VMMUIDBase, Privileged: true}
	cases := []struct {
		name   string
		dev    *host.DevStat
		user   host.KVMUser
		want   []string
		forbid []string
	}{
		{"no /dev/kvm", nil, user, []string{"warn accelerator", "does not exist", "modprobe kvm_intel"}, []string{"usermod"}},
		{"not in the kvm group", kvm, user, []string{"warn accelerator", "not in group kvm", "usermod -aG kvm $USER", "log out and in again"}, nil},
		{"joined, same session", kvm, relogin, []string{"warn accelerator", "log out and in again", "newgrp kvm"}, []string{"usermod"}},
		{"0600 root:root as root", &host.DevStat{Perm: 0o600}, asRoot, []string{"warn accelerator", "0600 root:0", "udev rule"}, []string{"usermod", "modprobe"}},
		{"group kvm as root", kvm, asRoot, []string{"ok   accelerator", "kvm:"}, []string{"fix:"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := host.CheckKVM(c.dev, c.user)
			p := host.Facts{KVMOpens: v.OK, KVMErr: v.Why, KVMFix: v.Fix, KVMModule: "kvm_intel", CPUVirtExt: true}
			var cs []check
			doctorAccel(collect(&cs), "auto", p)
			var out bytes.Buffer
			writeChecks(&out, cs)
			for _, w := range c.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("doctor lacks %q:\n%s", w, out.String())
				}
			}
			for _, f := range c.forbid {
				if strings.Contains(out.String(), f) {
					t.Errorf("doctor says %q:\n%s", f, out.String())
				}
			}
		})
	}
}

// TestDoctorVMMJailUnprivileged: without root there is no jail and no delegated cgroup;
// doctor says both.
func TestDoctorVMMJailUnprivileged(t *testing.T) {
	var cs []check
	doctorVMMJail(collect(&cs), 1000)
	var out bytes.Buffer
	writeChecks(&out, cs)
	bad := failed(cs)
	for _, w := range []string{"warn vmm jail", "unprivileged", "warn vmm cgroup", "no cgroup v2 subtree is delegated"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("doctor lacks %q:\n%s", w, out.String())
		}
	}
	if bad != 0 {
		t.Errorf("a missing jail is not a failure, doctor counted %d", bad)
	}
}
