package fleet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// ErrSecrets refuses a client with secrets: the bucket is readable by every
// replica's NATS identity, so no secret goes into it in clear.
var ErrSecrets = errors.New("a shared registry does not carry secrets")

// MaxValue bounds one registry value: about 3,000 allowlist entries, far
// past any sandbox's, where a value up to NATS's max payload would let one
// writer load every replica with tens of thousands of entries.
const MaxValue = 64 << 10

// ErrTooLarge refuses a client whose record is past MaxValue.
var ErrTooLarge = errors.New("registry value too large")

// keyPrefix starts every client key; the rest is the address with ':' as '_'
// (KV keys allow neither ':' nor '%').
const keyPrefix = "c."

func keyOf(ip netip.Addr) string {
	return keyPrefix + strings.ReplaceAll(ip.Unmap().String(), ":", "_")
}

func ipOf(key string) (netip.Addr, error) {
	s, ok := strings.CutPrefix(key, keyPrefix)
	if !ok {
		return netip.Addr{}, fmt.Errorf("key %q lacks the %q prefix", key, keyPrefix)
	}
	ip, err := netip.ParseAddr(strings.ReplaceAll(s, "_", ":"))
	if err != nil {
		return netip.Addr{}, fmt.Errorf("key %q: %w", key, err)
	}
	return ip.Unmap(), nil
}

// encode is the bucket value of c under key: the same record the admin API
// and state file use, signed by this replica's key.
func (f *Fleet) encode(key string, c proxy.Client) ([]byte, error) {
	if !c.Secrets.Empty() {
		return nil, fmt.Errorf("client %q has secrets: %w; register secrets per replica or leave them out", c.ID, ErrSecrets)
	}
	if f.opts.Signer == nil {
		return nil, fmt.Errorf("client %q: %w: %w; edit the registry through a replica with proxy.registry_sign_key", c.ID, admin.ErrUnavailable, ErrNoSigner)
	}
	b, err := json.Marshal(admin.Record(c))
	if err != nil {
		return nil, err
	}
	if b, err = seal(f.opts.Signer, key, b); err == nil && len(b) > MaxValue {
		err = fmt.Errorf("client %q: record is %d bytes, at most %d: %w; shorten its allowlist", c.ID, len(b), MaxValue, ErrTooLarge)
	}
	return b, err
}

// decode parses a bucket value strictly: a value no trusted key signed, or
// a field it does not know (a restriction it would fail to enforce) is
// malformed.
func (f *Fleet) decode(key string, data []byte) (proxy.Client, error) {
	if len(data) > MaxValue {
		return proxy.Client{}, fmt.Errorf("value is %d bytes, at most %d: %w", len(data), MaxValue, ErrTooLarge)
	}
	data, err := unseal(f.trusted, key, data)
	if err != nil {
		return proxy.Client{}, err
	}
	var r admin.ClientJSON
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return proxy.Client{}, fmt.Errorf("value: %w", err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return proxy.Client{}, errors.New("value: trailing data after the JSON object")
	}
	c, err := r.Client()
	if err != nil {
		return proxy.Client{}, err
	}
	ip, err := ipOf(key)
	if err != nil {
		return proxy.Client{}, err
	}
	if ip != c.IP {
		return proxy.Client{}, fmt.Errorf("value names %s under the key of %s", c.IP, ip)
	}
	return c, nil
}
