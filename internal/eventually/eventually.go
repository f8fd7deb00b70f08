// Package eventually is the one way a test waits for something another goroutine
// or process brings about: it polls a condition until a deadline, so no test sleeps
// a guessed while and hopes, and a condition that never holds fails with what it was.
package eventually

import (
	"testing"
	"time"
)

// True polls cond until it holds or within has passed; then it fails the test
// naming what was awaited. The first polls follow each other closely and the gap
// grows to 50 ms, so a fast condition costs little and a slow one little CPU.
func True(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Within(within, cond) {
		t.Fatalf("%s: not within %s", what, within)
	}
}

// Within polls cond like True and reports whether it held in time, for a caller
// that goes on when it does not (or reports more than the condition's name).
func Within(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	gap := time.Millisecond
	for {
		if cond() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(min(gap, time.Until(deadline)))
		gap = min(2*gap, 50*time.Millisecond)
	}
}
