package main

import (
	"os/exec"
	"regexp"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	out, err := exec.Command(crackboxBin(t), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^crackbox github\.com/crackbox/crackbox \S+ \(revision \S+.*go1\.\d+`).Match(out) {
		t.Errorf("crackbox --version = %q, want the module, its version, the revision and the Go version", out)
	}
}
