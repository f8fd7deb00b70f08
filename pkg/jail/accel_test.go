package jail

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
)

// TestBadAccelIsBadSpec: an accelerator the host cannot give, or one with no such name,
// fails the run before anything starts as a bad spec naming it.
func TestBadAccelIsBadSpec(t *testing.T) {
	_, err := prepare(Spec{Accel: "hvf"}, slog.New(slog.DiscardHandler))
	if !errors.Is(err, ErrBadSpec) || !strings.Contains(err.Error(), `"hvf"`) {
		t.Fatalf("prepare with accel hvf: %v, want ErrBadSpec naming it", err)
	}
}
