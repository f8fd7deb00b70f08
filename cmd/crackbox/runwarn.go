package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// warnStdinDropped says so when stdin is a pipe or a file that the run will not
// forward (no -i): `echo x | crackbox run -- cat` would otherwise print nothing
// and leave the user guessing. A terminal or /dev/null gets no warning.
func warnStdinDropped(w io.Writer, stdin *os.File) {
	fi, err := stdin.Stat()
	if err != nil {
		return
	}
	kind := ""
	switch m := fi.Mode(); {
	case m&os.ModeNamedPipe != 0:
		kind = "a pipe"
	case m.IsRegular():
		kind = "a file"
	case m&os.ModeSocket != 0:
		kind = "a socket"
	default:
		return
	}
	fmt.Fprintf(w, "crackbox: warning: stdin is %s but -i is not set, so the command reads nothing from it; add -i to forward it\n", kind)
}

// warnAllowAll names the risk of --allow '*': the jail still refuses private
// and host addresses, but any public host is reachable, so egress no longer
// fails closed.
func warnAllowAll(w io.Writer, list *allow.List) {
	if list != nil && slices.Contains(list.Entries(), "*") {
		fmt.Fprintln(w, "crackbox: warning: --allow '*' lets the command reach every public host; name the hosts it needs (--learn lists them)")
	}
}

// hostNotes prints what this host lacks (no KVM, a VMM it cannot confine) as one line,
// or nothing under -q: it is the host's state, not the run's, and crackbox doctor
// reports it in full with the fix.
func hostNotes(w io.Writer, quiet bool) func([]jail.HostNote) {
	return func(notes []jail.HostNote) {
		if quiet || len(notes) == 0 {
			return
		}
		whats := make([]string, len(notes))
		for i, n := range notes {
			whats[i] = n.What
		}
		fmt.Fprintf(w, "crackbox: note: %s (crackbox doctor says why and how to fix it)\n", strings.Join(whats, "; "))
	}
}
