package main

import (
	"regexp"
	"testing"
)

func TestVersionFlag(t *testing.T) {
	out := mustAz(t, env(t, t.TempDir()), "--version")
	if !regexp.MustCompile(`^arizuko github\.com/crackbox/crackbox \S+ \(revision \S+.*go1\.\d+`).MatchString(out) {
		t.Errorf("arizuko --version = %q, want the module, its version, the revision and the Go version", out)
	}
}
