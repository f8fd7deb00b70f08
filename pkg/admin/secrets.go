package admin

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"os"

	"github.com/crackbox/crackbox/internal/envvar"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// EnvStateKey names the environment variable that holds the state key.
const EnvStateKey = envvar.StateKey

// Errors callers branch on.
var (
	// ErrNoStateKey: secrets would be saved, or were saved, without a key.
	ErrNoStateKey = errors.New("no state key: set " + EnvStateKey + " or proxy.state_key_file")
	// ErrStateKey: the saved secrets do not open under the key given.
	ErrStateKey = errors.New("the state file's secrets do not open under this state key")
)

// stateKeyFix tells an operator how to make a key.
const stateKeyFix = "a 32-byte key as base64 or 64 hex digits, e.g. `head -c32 /dev/urandom | base64`"

// LoadStateKey returns the key that seals secrets in the state file: env (the
// value of $CRACKBOX_STATE_KEY, which the binary reads and passes in), else the
// contents of file. Several keys may be given (comma, space or newline
// separated): the first seals, all open. Neither set is not an error: it
// returns nil. A file others may read is a warning in log (nil discards).
func LoadStateKey(env, file string, log *slog.Logger) (*secrets.Ring, error) {
	src, text := "$"+EnvStateKey, env
	if text == "" && file != "" {
		b, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("proxy.state_key_file: %w", err)
		}
		if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 && log != nil {
			log.Warn("state key file is readable by others", "file", file, "mode", fi.Mode().Perm().String())
		}
		src, text = file, string(b)
	}
	if text == "" {
		return nil, nil
	}
	keys, err := secrets.ParseKeys(text)
	if err != nil {
		return nil, fmt.Errorf("%s: want %s: %w", src, stateKeyFix, secrets.ErrBadKey)
	}
	return secrets.NewRing(keys...)
}

// secretRequest is one secret of POST /v1/register.
type secretRequest struct {
	Name  string   `json:"name"`
	Hosts []string `json:"hosts"`
	Value string   `json:"value"`
}

// secretSet builds a client's secrets with a placeholder each and a CA of
// their own; nil when there are none. Errors never quote a value.
func secretSet(reqs []secretRequest) (*inject.Set, error) {
	if len(reqs) == 0 {
		return nil, nil
	}
	list := make([]inject.Secret, 0, len(reqs))
	for _, r := range reqs {
		list = append(list, inject.Secret{Name: r.Name, Hosts: r.Hosts, Value: r.Value})
	}
	return inject.New(list)
}

// secretAAD binds a client's sealed secrets to its address and ID, so a
// sealed blob moved to another client does not open.
func secretAAD(ip, id string) []byte {
	return secrets.AAD("crackbox-proxy-client", ip, id)
}

// sealSecrets seals c's secrets for the state file; nil when it has none.
func (s *Server) sealSecrets(c proxy.Client) ([]byte, error) {
	if c.Secrets.Empty() {
		return nil, nil
	}
	if s.opts.StateKey == nil {
		return nil, ErrNoStateKey
	}
	sv, err := c.Secrets.Save()
	if err != nil {
		return nil, err
	}
	plain, err := json.Marshal(sv)
	if err != nil {
		return nil, err
	}
	defer clear(plain)
	return s.opts.StateKey.Seal(secretAAD(c.IP.String(), c.ID), plain)
}

// openSecrets opens a saved client's sealed secrets.
func openSecrets(ring *secrets.Ring, ip netip.Addr, id string, blob []byte) (*inject.Set, error) {
	if ring == nil {
		return nil, ErrNoStateKey
	}
	plain, err := ring.Open(secretAAD(ip.String(), id), blob)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStateKey, err)
	}
	defer clear(plain)
	var sv inject.Saved
	if err := json.Unmarshal(plain, &sv); err != nil {
		return nil, fmt.Errorf("sealed secrets: %w", err)
	}
	set, err := inject.Restore(sv)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errSecretsStale, err)
	}
	return set, nil
}

// errSecretsStale: sealed secrets opened but cannot serve again (their CA expired).
var errSecretsStale = errors.New("saved secrets can no longer be used")

// clientCA serves the PEM certificate of the CA a client's guest must trust
// for its intercepted hosts. {client} is the client's IP or ID.
func (s *Server) clientCA(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("client")
	var c proxy.Client
	var ok bool
	if ip, err := netip.ParseAddr(key); err == nil {
		c, ok = s.opts.Registry.Lookup(ip)
	} else {
		c, ok = s.opts.Registry.LookupID(key)
	}
	if !ok {
		writeError(w, http.StatusNotFound, "unknown_client", fmt.Sprintf("no client registered as %q (give its IP or ID)", key))
		return
	}
	if c.Secrets.Empty() {
		writeError(w, http.StatusNotFound, "no_secrets", fmt.Sprintf("client %q has no secrets, so no CA: nothing of its traffic is intercepted", key))
		return
	}
	w.Header().Set("Content-Type", "application/x-pem-file")
	w.Write(c.Secrets.CA().PEM())
}
