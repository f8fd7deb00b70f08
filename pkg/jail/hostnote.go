package jail

import "log/slog"

// HostNote is one thing this host lacks for a fast, fully confined run: no usable
// KVM, a VMM without its own sandbox. It is state of the host, not of the run, so a
// caller may show it once and briefly (crackbox doctor has the full story).
type HostNote struct {
	What string // short, e.g. "no usable kvm, using tcg (slow)"
	Why  string // the detail doctor also reports
}

// reportHostNotes hands the notes to Spec.HostNotes in one call, or without that hook
// logs each as a warning.
func reportHostNotes(s Spec, log *slog.Logger, notes []HostNote) {
	if len(notes) == 0 {
		return
	}
	if s.HostNotes != nil {
		s.HostNotes(notes)
		return
	}
	for _, n := range notes {
		log.Warn(n.What, "why", n.Why)
	}
}
