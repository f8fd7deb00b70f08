package logsetup

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want slog.Level
		err  bool
	}{
		{"debug", slog.LevelDebug, false},
		{"info", slog.LevelInfo, false},
		{"warn", slog.LevelWarn, false},
		{"error", slog.LevelError, false},
		{"", 0, true},
		{"WARN", 0, true},
		{"debug+2", 0, true},
		{"verbose", 0, true},
	} {
		got, err := ParseLevel(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), `"`+tc.in+`"`) || !strings.Contains(err.Error(), "debug, info, warn, error") {
				t.Errorf("%q: err %v, want one naming the input and the choices", tc.in, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%q: %v %v, want %v", tc.in, got, err, tc.want)
		}
	}
}

// The level a reload sets through the LevelVar takes effect on the logger New made.
func TestNewLevelFollowsReload(t *testing.T) {
	var buf bytes.Buffer
	log, lv := New(&buf, slog.LevelWarn)
	log.Info("hidden")
	lv.Set(slog.LevelInfo)
	log.Info("shown")
	if s := buf.String(); strings.Contains(s, "hidden") || !strings.Contains(s, "msg=shown") {
		t.Fatalf("log %q, want only the line after the reload", s)
	}
}
