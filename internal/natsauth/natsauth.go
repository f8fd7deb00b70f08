// Package natsauth is how crackbox and arizuko authenticate to NATS: a JWT
// .creds file, an nkey seed file or user:password in the URL, over TLS. A
// process refuses to connect without both unless its operator asked for
// --insecure-nats: on a NATS anyone can reach, an anonymous client could
// widen a proxy fleet's egress or squat a folder's turns.
package natsauth

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/nats-io/nats.go"
)

// Flag names the opt-out every NATS client of the project takes.
const Flag = "--insecure-nats"

// Errors a caller branches on.
var (
	// ErrNoCredentials is a secure connection asked for without an identity.
	ErrNoCredentials = errors.New("NATS without credentials")
	// ErrTwoIdentities is a .creds file and an nkey seed both given.
	ErrTwoIdentities = errors.New("NATS credentials given twice")
)

// Auth is one process's NATS identity and trust.
type Auth struct {
	URL   string // comma-separated NATS URLs; user:password@ is allowed
	Creds string // JWT credentials file (.creds); "" = none
	NKey  string // nkey seed file; "" = none
	CA    string // PEM CAs of the servers' TLS; "" = system roots
	// Insecure lets the connection go without credentials or TLS.
	Insecure bool
}

// Check refuses an Auth without credentials unless it is Insecure. keys
// name the settings of the credentials in the caller's terms, for the fix.
func (a Auth) Check(keys string) error {
	if a.Creds != "" && a.NKey != "" {
		return fmt.Errorf("%w: pick one of %s", ErrTwoIdentities, keys)
	}
	if a.Insecure || a.Creds != "" || a.NKey != "" || a.urlUser() {
		return nil
	}
	return fmt.Errorf("%w: set %s (or user:password@ in the URL) and use TLS, or pass %s to run without either", ErrNoCredentials, keys, Flag)
}

func (a Auth) urlUser() bool {
	for _, s := range strings.Split(a.URL, ",") {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil && u.User != nil && u.User.Username() != "" {
			return true
		}
	}
	return false
}

// Options are the nats.Options of a: the identity, and TLS required (a
// server that does not offer it is refused) unless Insecure.
func (a Auth) Options() ([]nats.Option, error) {
	var o []nats.Option
	if !a.Insecure {
		o = append(o, nats.Secure(&tls.Config{MinVersion: tls.VersionTLS12}))
	}
	if a.Creds != "" {
		o = append(o, nats.UserCredentials(a.Creds))
	}
	if a.NKey != "" {
		opt, err := nats.NkeyOptionFromSeed(a.NKey)
		if err != nil {
			return nil, fmt.Errorf("nkey seed file %s: %w", a.NKey, err)
		}
		o = append(o, opt)
	}
	if a.CA != "" {
		o = append(o, nats.RootCAs(a.CA))
	}
	return o, nil
}

// Describe says for a log or /health how the connection is protected.
func (a Auth) Describe() string {
	if a.Insecure {
		return "insecure (" + Flag + "): credentials and TLS not required"
	}
	return "credentials and tls"
}

// Explain turns a connect error into one that names the fix.
func Explain(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, nats.ErrSecureConnWanted):
		return fmt.Errorf("%w: the NATS server does not offer TLS; enable tls on it, or pass %s", err, Flag)
	case errors.Is(err, nats.ErrAuthorization), strings.Contains(strings.ToLower(err.Error()), "authorization violation"):
		return fmt.Errorf("%w: the NATS server refused the credentials", err)
	}
	return err
}
