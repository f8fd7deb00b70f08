// Package logsetup is the one place a binary makes its logger: a text handler on
// stderr whose level comes from one parser, so crackbox and arizuko read
// log levels the same way.
package logsetup

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// Levels are the level names ParseLevel accepts.
var Levels = []string{"debug", "info", "warn", "error"}

// ParseLevel maps a level name to its slog level; the error names the input and
// the choices.
func ParseLevel(s string) (slog.Level, error) {
	switch s {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("log level %q: want one of %s", s, strings.Join(Levels, ", "))
}

// New returns a text logger on w at level; the LevelVar lets a reload change it.
func New(w io.Writer, level slog.Level) (*slog.Logger, *slog.LevelVar) {
	lv := new(slog.LevelVar)
	lv.Set(level)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lv})), lv
}
