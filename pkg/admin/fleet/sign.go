package fleet

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/nats-io/nkeys"
)

// Every value in the bucket is signed by a key of the admin API: any NATS
// identity that can write the bucket (a proxy host's, say) could otherwise
// widen every replica's egress. A value whose signature does not verify
// under a trusted key is malformed: skipped, counted and its address refused.

// ErrUnsigned marks a value without a valid signature of a trusted key.
var ErrUnsigned = errors.New("value not signed by a trusted registry key")

// ErrNoSigner refuses an edit on a replica that holds no signing key.
var ErrNoSigner = errors.New("this replica has no registry signing key")

// envelope is a bucket value: the client record exactly as signed.
type envelope struct {
	Record json.RawMessage `json:"record"`
	Signer string          `json:"signer"` // public nkey
	Sig    string          `json:"sig"`    // base64url ed25519 over signed(key, record)
}

// signed is what a signature covers: the key too, so a value cannot be
// moved to another address.
func signed(key string, record []byte) []byte {
	return append([]byte("crackbox-registry\x00"+key+"\x00"), record...)
}

// LoadSigner reads an nkey seed file (nsc's or `nk -gen account`'s).
func LoadSigner(path string) (nkeys.KeyPair, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	kp, err := nkeys.FromSeed(bytes.TrimSpace(b))
	if err != nil {
		return nil, fmt.Errorf("%s: not an nkey seed: %w", path, err)
	}
	return kp, nil
}

// CheckSigners validates public nkeys given as trusted signers.
func CheckSigners(keys []string) error {
	for _, k := range keys {
		if _, err := nkeys.FromPublicKey(k); err != nil {
			return fmt.Errorf("%q is not a public nkey: %w", k, err)
		}
	}
	return nil
}

// seal signs record under key with kp.
func seal(kp nkeys.KeyPair, key string, record []byte) ([]byte, error) {
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	sig, err := kp.Sign(signed(key, record))
	if err != nil {
		return nil, err
	}
	return json.Marshal(envelope{Record: record, Signer: pub, Sig: base64.RawURLEncoding.EncodeToString(sig)})
}

// unseal returns the record of a value signed by one of trusted.
func unseal(trusted []string, key string, data []byte) ([]byte, error) {
	var e envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsigned, err)
	}
	if dec.Decode(&struct{}{}) != io.EOF {
		return nil, errors.New("value: trailing data after the JSON object")
	}
	if e.Signer == "" || len(e.Record) == 0 {
		return nil, fmt.Errorf("%w: no signer or record", ErrUnsigned)
	}
	if !slices.Contains(trusted, e.Signer) {
		return nil, fmt.Errorf("%w: signer %s is not trusted", ErrUnsigned, e.Signer)
	}
	sig, err := base64.RawURLEncoding.DecodeString(e.Sig)
	if err != nil {
		return nil, fmt.Errorf("%w: signature: %v", ErrUnsigned, err)
	}
	pk, err := nkeys.FromPublicKey(e.Signer)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnsigned, err)
	}
	if err := pk.Verify(signed(key, e.Record), sig); err != nil {
		return nil, fmt.Errorf("%w: signer %s: %v", ErrUnsigned, short(e.Signer), err)
	}
	return e.Record, nil
}

func short(pub string) string {
	if len(pub) > 12 {
		return pub[:12] + "…"
	}
	return pub
}
