package adapter

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Window is how far a signed request's timestamp may be from the receiver's
// clock: a captured request cannot be replayed after it.
const Window = 5 * time.Minute

// ErrSignature is a request whose signature is missing, wrong or stale.
var ErrSignature = errors.New("bad adapter signature")

// Signature is the X-Arizuko-Signature value of body sent at ts (unix
// seconds): "v1=" and the hex HMAC-SHA256 of "v1:<ts>:<body>" under secret,
// the scheme Slack and GitHub use, so a timestamp cannot be swapped alone.
func Signature(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v1:%d:", ts)
	m.Write(body)
	return "v1=" + hex.EncodeToString(m.Sum(nil))
}

// Sign sets the timestamp and signature headers of a request carrying body.
func Sign(h http.Header, secret string, now time.Time, body []byte) {
	ts := now.Unix()
	h.Set(HeaderTimestamp, strconv.FormatInt(ts, 10))
	h.Set(HeaderSignature, Signature(secret, ts, body))
}

// Verify checks the signature headers h of body against secret at now.
func Verify(h http.Header, secret string, now time.Time, body []byte) error {
	if secret == "" {
		return fmt.Errorf("%w: the receiver has no secret configured", ErrSignature)
	}
	raw, sig := h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if raw == "" || sig == "" {
		return fmt.Errorf("%w: %s and %s are required", ErrSignature, HeaderTimestamp, HeaderSignature)
	}
	ts, err := strconv.ParseInt(raw, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: %s %q is not unix seconds", ErrSignature, HeaderTimestamp, raw)
	}
	if d := now.Sub(time.Unix(ts, 0)); d > Window || d < -Window {
		return fmt.Errorf("%w: timestamp is %s away from now, the window is %s", ErrSignature, d.Round(time.Second), Window)
	}
	if !strings.HasPrefix(sig, "v1=") || !hmac.Equal([]byte(sig), []byte(Signature(secret, ts, body))) {
		return fmt.Errorf("%w: signature does not match the body", ErrSignature)
	}
	return nil
}
