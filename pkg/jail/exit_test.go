package jail

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// TestExitResult maps exit frames, honest and hostile, to results: a hostile guest's
// setup failure text is what crackbox prints under its own name and what a run record
// and an arizuko outcome keep.
func TestExitResult(t *testing.T) {
	cases := []struct {
		name   string
		exit   control.Exit
		code   int
		signal int
		text   string // a prefix of ExecError; "" wants none
	}{
		{"exit code", control.Exit{Code: 3}, 3, 0, ""},
		{"signal", control.Exit{Signal: 9}, ExitSignalBase + 9, 9, ""},
		{"not found", control.Exit{Error: control.ExecNotFound}, ExitNotFound, 0, "command not found"},
		{"setup failure", control.Exit{Error: "mount workdir: no such device"}, ExitFailed, 0, "mount workdir: no such device"},
		{"huge signal", control.Exit{Signal: 1 << 40}, ExitFailed, 0, "guest reported an impossible signal"},
		{"negative signal", control.Exit{Signal: -1}, ExitFailed, 0, "guest reported an impossible signal"},
		{"terminal escapes", control.Exit{Error: "ok\x1b]0;owned\x07\ncrackbox: all requests allowed"}, ExitFailed, 0, "ok\uFFFD]0;owned\uFFFD\uFFFDcrackbox"},
		{"a whole message", control.Exit{Error: strings.Repeat("é", control.MaxMessage/2)}, ExitFailed, 0, "éé"},
		{"invalid bytes", control.Exit{Error: strings.Repeat("\xff", 4096)}, ExitFailed, 0, "\uFFFD"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := exitResult(Result{}, c.exit)
			if res.Exit != c.code || res.Signal != c.signal {
				t.Errorf("exit %d signal %d, want %d %d", res.Exit, res.Signal, c.code, c.signal)
			}
			if !strings.HasPrefix(res.ExecError, c.text) || (c.text == "") != (res.ExecError == "") {
				t.Errorf("ExecError %.80q, want it to start with %q", res.ExecError, c.text)
			}
			if len(res.ExecError) > maxGuestText || !utf8.ValidString(res.ExecError) {
				t.Errorf("ExecError is %d bytes (valid UTF-8: %v), want at most %d", len(res.ExecError), utf8.ValidString(res.ExecError), maxGuestText)
			}
			if i := strings.IndexFunc(res.ExecError, func(r rune) bool { return !unicode.IsPrint(r) }); i >= 0 {
				t.Errorf("ExecError holds an unprintable rune at %d: %.80q", i, res.ExecError)
			}
		})
	}
}

// TestConsoleReason picks the crash line from a console log, which guest root can
// write as well as the kernel.
func TestConsoleReason(t *testing.T) {
	cases := []struct{ name, con, want string }{
		{"panic", "[    1.0] ok\n[    2.0] Kernel panic - not syncing: VFS\n[    2.1] ---[ end ]", "guest kernel: Kernel panic - not syncing: VFS"},
		{"oom", "Out of memory: Killed process 42 (node)\n", "guest kernel: Out of memory: Killed process 42 (node)"},
		{"none", "[    1.0] all fine\n", ""},
		{"guest-init", "level=INFO msg=\"guest-init start\" uptime=1.26\nlevel=ERROR msg=\"control channel\" err=\"no virtio-serial port named \\\"ctl\\\"\" uptime=31.3\n", `guest-init: "control channel" err="no virtio-serial port named \"ctl\"" uptime=31.3`},
		{"kernel before guest-init", "level=ERROR msg=modules err=x\nKernel panic - not syncing\n", "guest kernel: Kernel panic"},
		{"forged", "Kernel panic\x1b[2J\x1b[Hcrackbox: ok" + strings.Repeat("x", 64<<10), "guest kernel: Kernel panic\uFFFD[2J\uFFFD[Hcrackbox: ok"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := consoleReason(c.con)
			if !strings.HasPrefix(got, c.want) || (c.want == "") != (got == "") {
				t.Errorf("got %.100q, want it to start with %q", got, c.want)
			}
			if len(got) > len("guest kernel: ")+maxGuestText {
				t.Errorf("got %d bytes, want at most %d", len(got), len("guest kernel: ")+maxGuestText)
			}
		})
	}
}
