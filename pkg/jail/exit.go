package jail

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// maxGuestText bounds a text the guest sends for the host to show: an exit frame's
// setup failure or a log line. Guest-init's own texts are one short line; a hostile
// guest's could be a whole control message, which would then be printed under
// crackbox's name, kept in run records and, for arizuko, overflow a turn's outcome.
const maxGuestText = 512

// maxSignal is the highest signal number Linux has; a larger one in an exit frame is
// not a signal the command could have died of.
const maxSignal = 64

// exitResult maps the guest's exit frame to Docker-like statuses.
func exitResult(res Result, e control.Exit) Result {
	switch {
	case e.Error == control.ExecNotFound:
		res.Exit, res.ExecError = ExitNotFound, "command not found"
	case e.Error == control.ExecNotExecutable:
		res.Exit, res.ExecError = ExitNotExecutable, "command not executable"
	case e.Error != "":
		res.Exit, res.ExecError = ExitFailed, guestText(e.Error)
	case e.Signal > maxSignal || e.Signal < 0:
		res.Exit, res.ExecError = ExitFailed, "guest reported an impossible signal"
	case e.Signal > 0:
		res.Exit, res.Signal = ExitSignalBase+e.Signal, e.Signal
	default:
		res.Exit = e.Code
	}
	return res
}

// consoleReason is the console line that explains a crash, or "". Guest root can write
// the console too, so the line is a guest text like any other.
func consoleReason(con string) string {
	for _, marker := range []string{"Kernel panic", "Out of memory", "Attempted to kill init", "BUG:", "Oops"} {
		if i := strings.Index(con, marker); i >= 0 {
			line, _, _ := strings.Cut(con[i:], "\n")
			return "guest kernel: " + guestText(strings.TrimSpace(line))
		}
	}
	// guest-init logs why it gave up as its last error line before it powers off.
	if i := strings.LastIndex(con, initErrorMark); i >= 0 {
		line, _, _ := strings.Cut(con[i+len(initErrorMark):], "\n")
		return "guest-init: " + guestText(strings.TrimSpace(line))
	}
	return ""
}

// initErrorMark starts each error line guest-init writes to the console.
const initErrorMark = "level=ERROR msg="

// guestText makes a guest's text safe to print on the host's terminal and to store:
// one line of printable UTF-8, at most maxGuestText bytes, so it can neither send
// escape sequences to the operator's terminal nor fake a line of crackbox's own.
func guestText(s string) string {
	long := len(s) > maxGuestText
	if long {
		s = s[:maxGuestText]
	}
	var b strings.Builder
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if !unicode.IsPrint(r) {
			r = '\uFFFD'
		}
		b.WriteRune(r)
	}
	t := b.String()
	if !long && len(t) <= maxGuestText {
		return t
	}
	// Cut at a rune boundary, leaving room for the mark that says it was cut.
	cut := min(len(t), maxGuestText-len("…"))
	for cut > 0 && cut < len(t) && !utf8.RuneStart(t[cut]) {
		cut--
	}
	return t[:cut] + "…"
}
