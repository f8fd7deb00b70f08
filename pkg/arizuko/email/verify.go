package email

import (
	"errors"
	"fmt"
	"strings"

	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-msgauth/authres"
)

// ErrUnverified is a mail whose sender the receiving server did not vouch for.
var ErrUnverified = errors.New("sender not verified")

// Verify returns the lowercased From address when the receiving server's
// Authentication-Results show a pass for every required method, each for
// the From's domain (or a parent or child of it).
//
// Only the stamps above the first Received header are the receiving
// server's: it and its milters prepend theirs on receipt, so anything below
// came with the mail, and a sender can write any authserv-id there.
func Verify(h mail.Header, authservID string, require []string) (string, error) {
	from, err := h.AddressList("From")
	if err != nil || len(from) != 1 {
		return "", fmt.Errorf("from %q: want exactly one address: %w", h.Get("From"), ErrUnverified)
	}
	addr := strings.ToLower(from[0].Address)
	_, domain, ok := strings.Cut(addr, "@")
	if !ok || domain == "" {
		return "", fmt.Errorf("from %q has no domain: %w", addr, ErrUnverified)
	}
	passed := map[string]bool{}
	received := false
	fields := h.Fields()
	for fields.Next() {
		k := strings.ToLower(fields.Key())
		if k == "received" {
			received = true
			break
		}
		if k != "authentication-results" {
			continue
		}
		id, results, err := authres.Parse(fields.Value())
		if err != nil || !strings.EqualFold(id, authservID) {
			continue
		}
		for _, r := range results {
			if m, d := passFor(r); m != "" && aligned(d, domain) {
				passed[m] = true
			}
		}
	}
	if !received && len(require) > 0 {
		return "", fmt.Errorf("from %s: no Received header, so no stamp of %s can be told from the sender's: %w", addr, authservID, ErrUnverified)
	}
	var missing []string
	for _, m := range require {
		if !passed[m] {
			missing = append(missing, m)
		}
	}
	if len(missing) > 0 {
		return "", fmt.Errorf("from %s: %s has no %s pass for %s: %w", addr, authservID, strings.Join(missing, ", "), domain, ErrUnverified)
	}
	return addr, nil
}

// passFor names the method of a passing result and the domain it vouches for.
func passFor(r authres.Result) (method, domain string) {
	switch r := r.(type) {
	case *authres.SPFResult:
		if r.Value == authres.ResultPass {
			return "spf", domainOf(r.From)
		}
	case *authres.DKIMResult:
		if r.Value == authres.ResultPass {
			return "dkim", firstNonEmpty(r.Domain, domainOf(r.Identifier))
		}
	case *authres.DMARCResult:
		if r.Value == authres.ResultPass {
			return "dmarc", domainOf(r.From)
		}
	}
	return "", ""
}

// domainOf is the domain of an address, or the value itself when it is one.
func domainOf(v string) string {
	if _, d, ok := strings.Cut(v, "@"); ok {
		return strings.ToLower(d)
	}
	return strings.ToLower(v)
}

// aligned reports whether d vouches for the From domain: the same domain
// or one of them under the other (relaxed alignment without the public
// suffix list; a pass for "com" is never one).
func aligned(d, from string) bool {
	if d == "" || !strings.Contains(d, ".") {
		return false
	}
	return d == from || strings.HasSuffix(from, "."+d) || strings.HasSuffix(d, "."+from)
}

func firstNonEmpty(v ...string) string {
	for _, s := range v {
		if s != "" {
			return s
		}
	}
	return ""
}
