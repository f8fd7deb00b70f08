package jailtest_test

import (
	"bytes"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
)

// TestGuestBoots boots one guest through the helper every guest test uses; make test's
// check that a machine without a kernel fails instead of skipping runs this test.
func TestGuestBoots(t *testing.T) {
	s := jailtest.Spec(t, "sh", "-c", "echo booted; exit 3")
	var out bytes.Buffer
	s.Stdout = &out
	res, err := jailtest.Run(t, s)
	if err != nil {
		t.Fatal(err)
	}
	if res.Exit != 3 || out.String() != "booted\n" {
		t.Fatalf("exit %d, stdout %q: want 3 and %q", res.Exit, out.String(), "booted\n")
	}
}
