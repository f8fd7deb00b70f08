package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/netjail"
)

func TestDoctorNamesMissingPieces(t *testing.T) {
	var out bytes.Buffer
	bad := doctor(&out, "/nonexistent/vmlinux", "/nonexistent/guest-init", "auto", "auto")
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
