package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
)

// TestHostNotesLine: what the host lacks is one line naming doctor, and nothing under -q.
func TestHostNotesLine(t *testing.T) {
	notes := []jail.HostNote{{What: "no usable kvm, using tcg (slow)", Why: "/dev/kvm missing"}, {What: "vmm not fully confined", Why: "unprivileged"}}
	var buf bytes.Buffer
	hostNotes(&buf, true)(notes)
	if buf.Len() != 0 {
		t.Fatalf("-q printed %q", buf.String())
	}
	hostNotes(&buf, false)(notes)
	out := buf.String()
	if strings.Count(out, "\n") != 1 || !strings.Contains(out, "tcg") || !strings.Contains(out, "vmm not fully confined") || !strings.Contains(out, "crackbox doctor") {
		t.Fatalf("want one line naming both notes and doctor, got %q", out)
	}
}
