// Package inject keeps credentials out of the guest: the guest gets a random
// placeholder for each secret, and the proxy swaps it for the real value only
// in requests to the hosts the secret is bound to, and swaps the value back
// to the placeholder in everything those hosts answer.
//
// A placeholder is fresh random per Set and secret and never derived from the
// value, so it tells an attacker nothing. Request bodies are never rewritten:
// the placeholder is replaced in header values, inside HTTP Basic
// credentials, and in the URL query.
package inject

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// ErrBadSecret is wrapped by New for a secret it cannot use.
var ErrBadSecret = errors.New("invalid secret")

// Reason is the refusal reason for a placeholder seen where it does not belong.
const Reason = "secret-exfiltration"

// placeholderPrefix starts every placeholder. Placeholders are lowercase
// letters, digits and dashes so they survive URLs, header values, Basic
// credentials and DNS labels unchanged, and DNS lowercasing cannot hide one.
const placeholderPrefix = "crackbox-secret-"

// MinValueLen is the shortest value accepted: a shorter one would be scrubbed
// out of unrelated response bytes by chance.
const MinValueLen = 8

// Secret is one credential and the hosts it may be sent to.
type Secret struct {
	Name  string
	Hosts []string
	Value string
}

type entry struct {
	name        string
	hosts       []string
	value       string
	placeholder string
}

// Set is the secrets of one run with their placeholders and the run's CA.
// It is safe for concurrent use.
type Set struct {
	entries []entry
	ca      *CA
	maxVal  int
}

// New draws a placeholder for every secret and a CA for the run.
func New(secrets []Secret) (*Set, error) {
	s := &Set{}
	seen := map[string]bool{}
	for _, sec := range secrets {
		if !validName(sec.Name) {
			return nil, fmt.Errorf("secret name %q: use letters, digits and _ (an environment variable name): %w", sec.Name, ErrBadSecret)
		}
		if seen[sec.Name] {
			return nil, fmt.Errorf("secret %s named twice: %w", sec.Name, ErrBadSecret)
		}
		seen[sec.Name] = true
		if len(sec.Value) < MinValueLen {
			return nil, fmt.Errorf("secret %s: value shorter than %d bytes: %w", sec.Name, MinValueLen, ErrBadSecret)
		}
		if strings.IndexFunc(sec.Value, func(r rune) bool { return r < 0x20 || r == 0x7f }) >= 0 {
			return nil, fmt.Errorf("secret %s: value holds a control character (a newline?), which no header can carry: %w", sec.Name, ErrBadSecret)
		}
		if len(sec.Hosts) == 0 {
			return nil, fmt.Errorf("secret %s: no host to send it to (NAME@host): %w", sec.Name, ErrBadSecret)
		}
		e := entry{name: sec.Name, value: sec.Value, placeholder: newPlaceholder()}
		for _, h := range sec.Hosts {
			n, err := allow.NormalizeHost(h)
			if err != nil || strings.HasPrefix(n, "*") || isIPLiteral(n) {
				return nil, fmt.Errorf("secret %s: host %q: want a DNS name without wildcard or port: %w", sec.Name, h, ErrBadSecret)
			}
			e.hosts = append(e.hosts, n)
		}
		s.maxVal = max(s.maxVal, len(e.value))
		s.entries = append(s.entries, e)
	}
	ca, err := NewCA()
	if err != nil {
		return nil, err
	}
	s.ca = ca
	return s, nil
}

func newPlaceholder() string {
	b := make([]byte, 16)
	rand.Read(b)
	return placeholderPrefix + hex.EncodeToString(b)
}

func validName(n string) bool {
	if n == "" || n[0] >= '0' && n[0] <= '9' {
		return false
	}
	for _, r := range n {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

func isIPLiteral(h string) bool {
	return strings.Trim(h, "0123456789.") == "" || strings.Contains(h, ":")
}

// Empty reports whether the set holds no secret (a nil Set is empty).
func (s *Set) Empty() bool { return s == nil || len(s.entries) == 0 }

// CA returns the run's certificate authority.
func (s *Set) CA() *CA { return s.ca }

// Names returns the secret names in the order given to New.
func (s *Set) Names() []string {
	if s.Empty() {
		return nil
	}
	var out []string
	for _, e := range s.entries {
		out = append(out, e.name)
	}
	return out
}

// Env returns NAME=placeholder for every secret, for the guest environment.
func (s *Set) Env() []string {
	if s.Empty() {
		return nil
	}
	var out []string
	for _, e := range s.entries {
		out = append(out, e.name+"="+e.placeholder)
	}
	return out
}

// Placeholder returns the placeholder of the named secret.
func (s *Set) Placeholder(name string) string {
	if s.Empty() {
		return ""
	}
	for _, e := range s.entries {
		if e.name == name {
			return e.placeholder
		}
	}
	return ""
}

// Bound reports whether host (normalized, no port) has a secret bound to it.
// Only such hosts have their TLS terminated.
func (s *Set) Bound(host string) bool {
	if s.Empty() {
		return false
	}
	for _, e := range s.entries {
		if slices.Contains(e.hosts, host) {
			return true
		}
	}
	return false
}

// Mentions reports whether text holds something shaped like a placeholder
// of any run, for callers that must not record such text as a host name.
func Mentions(text string) bool {
	return strings.Contains(strings.ToLower(text), placeholderPrefix)
}

// Find returns the name of the first secret whose placeholder occurs in
// text, case-insensitively, or "".
func (s *Set) Find(text string) string {
	if s.Empty() || !strings.Contains(strings.ToLower(text), placeholderPrefix) {
		return ""
	}
	low := strings.ToLower(text)
	for _, e := range s.entries {
		if strings.Contains(low, e.placeholder) {
			return e.name
		}
	}
	return ""
}

// FindRequest returns the name of a secret whose placeholder occurs in the
// request line, the Host or any header of req (Basic credentials decoded), or "".
func (s *Set) FindRequest(req *http.Request) string {
	if s.Empty() {
		return ""
	}
	if n := s.Find(req.RequestURI + " " + req.URL.String() + " " + req.Host); n != "" {
		return n
	}
	for k, vs := range req.Header {
		for _, v := range vs {
			if n := s.Find(k + ":" + v); n != "" {
				return n
			}
			if dec, ok := basicPayload(v); ok {
				if n := s.Find(dec); n != "" {
					return n
				}
			}
		}
	}
	return ""
}

// ExfilError says that a request carried the placeholder of a secret that is
// not bound to its destination.
type ExfilError struct{ Name, Host string }

func (e *ExfilError) Error() string {
	return fmt.Sprintf("the placeholder of secret %s was sent to %s, which it is not bound to", e.Name, e.Host)
}

// basicPayload decodes the credentials of an "Authorization: Basic" value.
func basicPayload(v string) (string, bool) {
	scheme, cred, ok := strings.Cut(strings.TrimSpace(v), " ")
	if !ok || !strings.EqualFold(scheme, "basic") {
		return "", false
	}
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cred))
	if err != nil {
		return "", false
	}
	return string(b), true
}
