package inject

import (
	"encoding/base64"
	"net/http"
	"net/textproto"
	"strings"
)

// Pair is one string the proxy sent upstream in place of one the guest sent.
// A response is scrubbed of every Sent back to its Guest form.
type Pair struct{ Sent, Guest string }

// Rewrite swaps, in a request to host, the placeholders of the secrets bound
// to host for their values: in every header value, inside Basic credentials
// and in the URL query. A placeholder of a secret not bound to host anywhere
// in the request line or headers is an *ExfilError and req is left as it was
// for the caller to refuse. The body is never read nor rewritten.
//
// It returns the pairs a response must be scrubbed of: every value of the
// set and, for Basic credentials, the encoded form that was sent.
func (s *Set) Rewrite(host string, req *http.Request) ([]Pair, error) {
	if s.Empty() {
		return nil, nil
	}
	for _, e := range s.entries {
		if !e.bound(host) && s.findOne(req, e) {
			return nil, &ExfilError{Name: e.name, Host: host}
		}
	}
	pairs := s.valuePairs()
	for k, vs := range req.Header {
		for i, v := range vs {
			nv := s.swap(host, v)
			if dec, ok := basicPayload(nv); ok {
				if nd := s.swap(host, dec); nd != dec {
					enc := base64.StdEncoding.EncodeToString([]byte(nd))
					pairs = append(pairs, Pair{Sent: enc, Guest: base64.StdEncoding.EncodeToString([]byte(dec))})
					nv = "Basic " + enc
				}
			}
			vs[i] = nv
		}
		req.Header[k] = vs
	}
	if req.URL != nil && req.URL.RawQuery != "" {
		req.URL.RawQuery = s.swap(host, req.URL.RawQuery)
	}
	return pairs, nil
}

func (e entry) bound(host string) bool {
	for _, h := range e.hosts {
		if h == host {
			return true
		}
	}
	return false
}

// findOne reports whether e's placeholder occurs in the request line or headers.
func (s *Set) findOne(req *http.Request, e entry) bool {
	one := &Set{entries: []entry{e}}
	return one.FindRequest(req) != ""
}

// swap replaces the placeholders of the secrets bound to host in v.
func (s *Set) swap(host, v string) string {
	if !strings.Contains(strings.ToLower(v), placeholderPrefix) {
		return v
	}
	for _, e := range s.entries {
		if e.bound(host) {
			v = replaceFold(v, e.placeholder, e.value)
		}
	}
	return v
}

// replaceFold replaces old (lowercase) in s case-insensitively.
func replaceFold(s, old, new string) string {
	low := strings.ToLower(s)
	if len(low) != len(s) || !strings.Contains(low, old) {
		return strings.ReplaceAll(s, old, new)
	}
	var b strings.Builder
	for {
		i := strings.Index(low, old)
		if i < 0 {
			b.WriteString(s)
			return b.String()
		}
		b.WriteString(s[:i])
		b.WriteString(new)
		s, low = s[i+len(old):], low[i+len(old):]
	}
}

func (s *Set) valuePairs() []Pair {
	out := make([]Pair, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, Pair{Sent: e.value, Guest: e.placeholder})
	}
	return out
}

// ScrubHeader replaces every Sent of pairs in the names and values of h.
// Names are matched in any letter case: net/http canonicalizes them, so a
// value reflected into a name arrives with its letters' case changed.
func ScrubHeader(h http.Header, pairs []Pair) {
	renamed := map[string]string{}
	for k, vs := range h {
		for i, v := range vs {
			for _, p := range pairs {
				if p.Sent != "" {
					v = strings.ReplaceAll(v, p.Sent, p.Guest)
				}
			}
			vs[i] = v
		}
		nk := k
		for _, p := range pairs {
			if p.Sent != "" {
				nk = replaceFold(nk, strings.ToLower(p.Sent), p.Guest)
			}
		}
		if nk != k {
			renamed[k] = textproto.CanonicalMIMEHeaderKey(nk)
		}
	}
	for k, nk := range renamed {
		h[nk] = append(h[nk], h[k]...)
		delete(h, k)
	}
}
