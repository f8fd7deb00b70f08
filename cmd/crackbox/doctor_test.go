package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestDoctorNamesMissingPieces(t *testing.T) {
	var out bytes.Buffer
	bad := doctor(&out, "/nonexistent/vmlinux", "/nonexistent/guest-init", "auto")
	text := out.String()
	if bad < 2 {
		t.Fatalf("doctor counted %d missing pieces, want at least kernel and guest-init:\n%s", bad, text)
	}
	for _, want := range []string{
		"FAIL kernel", "/nonexistent/vmlinux", "make kernel",
		"FAIL guest-init", "make guest-init",
		"accelerator", "qemu", "vhost-vsock", "net-admin", "virtiofsd",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("doctor output lacks %q:\n%s", want, text)
		}
	}
}
