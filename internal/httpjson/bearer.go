package httpjson

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// Bearer returns the token of an "Authorization: Bearer <token>" header;
// ok is false when the header is missing or has another scheme.
func Bearer(r *http.Request) (token string, ok bool) {
	return strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
}

// Sum is the digest tokens are compared by: comparing digests instead of
// the tokens keeps the compare constant-time in their length too.
func Sum(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// Matches reports whether token hashes to one of sums. It looks at every
// sum so the time taken does not say which one matched.
func Matches(token string, sums ...[]byte) (int, bool) {
	got := Sum(token)
	at, found := -1, 0
	for i, s := range sums {
		if subtle.ConstantTimeCompare(got[:], s) == 1 {
			at, found = i, 1
		}
	}
	return at, found == 1
}

// Challenge answers a refused bearer token: the WWW-Authenticate header for
// realm, then the error envelope with status 401.
func (s Style) Challenge(w http.ResponseWriter, realm, code, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="`+realm+`"`)
	s.Error(w, http.StatusUnauthorized, code, msg)
}
