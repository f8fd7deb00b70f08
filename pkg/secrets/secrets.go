// Package secrets seals secret values with AES-256-GCM under a key ring. The
// associated data binds each ciphertext to its row (scope kind, scope id, key)
// so a sealed value copied to another row does not open.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
)

// Sentinel errors.
var (
	ErrNoKey   = errors.New("no secrets key configured")
	ErrBadKey  = errors.New("invalid secrets key")
	ErrOpen    = errors.New("secret does not open (tampered, moved to another row, or sealed under a key not in the ring)")
	ErrVersion = errors.New("unknown sealed format version")
)

// EnvKey and EnvKeyFile name the environment variables that carry Load's
// arguments; messages name them so an operator knows where a key comes from.
const (
	EnvKey     = "ARIZUKO_SECRETS_KEY"
	EnvKeyFile = "ARIZUKO_SECRETS_KEY_FILE"
)

const (
	version   = 1
	idLen     = 4
	nonceLen  = 12
	headerLen = 1 + idLen + nonceLen
)

type key struct {
	id   [idLen]byte
	aead cipher.AEAD
}

// Ring holds the keys: the first seals, all of them open.
type Ring struct{ keys []key }

// NewRing builds a ring from raw 32-byte keys, primary first.
func NewRing(raw ...[]byte) (*Ring, error) {
	if len(raw) == 0 {
		return nil, ErrNoKey
	}
	r := &Ring{}
	for i, k := range raw {
		if len(k) != 32 {
			return nil, fmt.Errorf("key %d is %d bytes, want 32 (generate one with `arizuko secret keygen`): %w", i+1, len(k), ErrBadKey)
		}
		block, err := aes.NewCipher(k)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		sum := sha256.Sum256(k)
		var kk key
		copy(kk.id[:], sum[:idLen])
		kk.aead = aead
		r.keys = append(r.keys, kk)
	}
	return r, nil
}

// ParseKeys reads keys separated by commas, spaces or newlines, each 32 bytes
// as base64 (standard or URL alphabet) or 64 hex digits. '#' starts a comment line.
func ParseKeys(s string) ([][]byte, error) {
	var out [][]byte
	for _, line := range strings.Split(s, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			k, err := decodeKey(f)
			if err != nil {
				return nil, fmt.Errorf("key %d: %w", len(out)+1, err)
			}
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		return nil, ErrNoKey
	}
	return out, nil
}

func decodeKey(s string) ([]byte, error) {
	if len(s) == 64 {
		if k, err := hex.DecodeString(s); err == nil {
			return k, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding, base64.RawStdEncoding, base64.RawURLEncoding} {
		if k, err := enc.DecodeString(s); err == nil {
			if len(k) != 32 {
				return nil, fmt.Errorf("decodes to %d bytes, want 32: %w", len(k), ErrBadKey)
			}
			return k, nil
		}
	}
	return nil, fmt.Errorf("not base64 or hex (generate one with `arizuko secret keygen`): %w", ErrBadKey)
}

// Load builds the ring from key, the value of $ARIZUKO_SECRETS_KEY, when it
// is set, else from keyFile. It returns ErrNoKey when neither is set. The
// caller's config loader reads the environment; Load reads none. A key file
// others may read is a warning in log (nil discards).
func Load(key, keyFile string, log *slog.Logger) (*Ring, error) {
	if key != "" {
		keys, err := ParseKeys(key)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", EnvKey, err)
		}
		return NewRing(keys...)
	}
	if keyFile == "" {
		return nil, fmt.Errorf("set $%s or a key file (secrets.key_file / $%s): %w", EnvKey, EnvKeyFile, ErrNoKey)
	}
	fi, err := os.Stat(keyFile)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w: %w", err, ErrNoKey)
	}
	if fi.Mode().Perm()&0o077 != 0 && log != nil {
		log.Warn("secrets key file is readable by others", "path", keyFile, "mode", fi.Mode().Perm().String())
	}
	data, err := os.ReadFile(keyFile)
	if err != nil {
		return nil, fmt.Errorf("secrets key file: %w", err)
	}
	keys, err := ParseKeys(string(data))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyFile, err)
	}
	return NewRing(keys...)
}

// GenerateKey returns a fresh random key in base64.
func GenerateKey() string {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // the OS RNG does not fail on Linux
	}
	return base64.StdEncoding.EncodeToString(k)
}

// AAD binds a ciphertext to its row. Each part is length-prefixed so no two
// distinct rows share the same bytes.
func AAD(scopeKind, scopeID, name string) []byte {
	var b []byte
	for _, p := range []string{"arizuko-secret-v1", scopeKind, scopeID, name} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(p)))
		b = append(b, p...)
	}
	return b
}

// Seal encrypts plaintext under the primary key with a fresh random nonce.
func (r *Ring) Seal(aad, plaintext []byte) ([]byte, error) {
	k := r.keys[0]
	out := make([]byte, headerLen, headerLen+len(plaintext)+k.aead.Overhead())
	out[0] = version
	copy(out[1:], k.id[:])
	if _, err := rand.Read(out[1+idLen : headerLen]); err != nil {
		return nil, fmt.Errorf("secrets: nonce: %w", err)
	}
	return k.aead.Seal(out, out[1+idLen:headerLen], plaintext, aad), nil
}

// Open decrypts a sealed value with whichever ring key sealed it.
func (r *Ring) Open(aad, blob []byte) ([]byte, error) {
	if len(blob) < headerLen {
		return nil, ErrOpen
	}
	if blob[0] != version {
		return nil, fmt.Errorf("version %d: %w", blob[0], ErrVersion)
	}
	for _, k := range r.keys {
		if string(k.id[:]) != string(blob[1:1+idLen]) {
			continue
		}
		pt, err := k.aead.Open(nil, blob[1+idLen:headerLen], blob[headerLen:], aad)
		if err != nil {
			return nil, ErrOpen
		}
		return pt, nil
	}
	return nil, ErrOpen
}

// Primary reports whether blob was sealed by the primary key (rotation skips it).
func (r *Ring) Primary(blob []byte) bool {
	return len(blob) >= headerLen && string(blob[1:1+idLen]) == string(r.keys[0].id[:])
}
