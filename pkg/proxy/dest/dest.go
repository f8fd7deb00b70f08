// Package dest names the two ways a destination host can fail to yield an address
// the egress may use. The proxy's destination guard and resolver return them; the
// network jail's DNS responder maps them to REFUSED and NXDOMAIN. They live apart
// from both so the responder need not import the proxy to branch on its verdicts.
package dest

import "errors"

// Sentinels callers branch on; returned errors wrap them with detail.
var (
	// ErrPrivateAddress: every address of the destination is one the guard
	// refuses (private, special-purpose, on-link, the proxy host's own).
	ErrPrivateAddress = errors.New("destination address not allowed")
	// ErrNoAddress: the name resolved to no address at all.
	ErrNoAddress = errors.New("host has no address")
)
