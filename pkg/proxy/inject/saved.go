package inject

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Saved is a Set as a daemon keeps it across restarts: the values, the
// placeholders its clients already hold and the CA they already trust. It
// holds every value in clear, so it is only ever stored sealed.
type Saved struct {
	Secrets []SavedSecret `json:"secrets"`
	CACert  []byte        `json:"ca_cert"` // DER
	CAKey   []byte        `json:"ca_key"`  // PKCS#8 DER
}

// SavedSecret is one secret of a Saved set.
type SavedSecret struct {
	Name        string   `json:"name"`
	Hosts       []string `json:"hosts"`
	Value       string   `json:"value"`
	Placeholder string   `json:"placeholder"`
}

// SecretInfo is what may be shown of a secret: never its value.
type SecretInfo struct {
	Name        string   `json:"name"`
	Hosts       []string `json:"hosts"`
	Placeholder string   `json:"placeholder"`
}

// Info describes the set's secrets without their values, in the order given to New.
func (s *Set) Info() []SecretInfo {
	if s.Empty() {
		return nil
	}
	out := make([]SecretInfo, 0, len(s.entries))
	for _, e := range s.entries {
		out = append(out, SecretInfo{Name: e.name, Hosts: append([]string(nil), e.hosts...), Placeholder: e.placeholder})
	}
	return out
}

// Save returns the set for sealed storage.
func (s *Set) Save() (Saved, error) {
	if s.Empty() {
		return Saved{}, nil
	}
	key, err := x509.MarshalPKCS8PrivateKey(s.ca.key)
	if err != nil {
		return Saved{}, fmt.Errorf("inject: CA key: %w", err)
	}
	sv := Saved{CACert: s.ca.cert.Raw, CAKey: key}
	for _, e := range s.entries {
		sv.Secrets = append(sv.Secrets, SavedSecret{Name: e.name, Hosts: e.hosts, Value: e.value, Placeholder: e.placeholder})
	}
	return sv, nil
}

// Restore rebuilds a saved set with the same placeholders and CA, checking
// it as New does.
func Restore(sv Saved) (*Set, error) {
	var secs []Secret
	for _, e := range sv.Secrets {
		secs = append(secs, Secret{Name: e.Name, Hosts: e.Hosts, Value: e.Value})
	}
	s, err := New(secs)
	if err != nil {
		return nil, err
	}
	for i, e := range sv.Secrets {
		if !validPlaceholder(e.Placeholder) {
			return nil, fmt.Errorf("saved secret %s: malformed placeholder: %w", e.Name, ErrBadSecret)
		}
		s.entries[i].placeholder = e.Placeholder
	}
	ca, err := loadCA(sv.CACert, sv.CAKey)
	if err != nil {
		return nil, err
	}
	s.ca = ca
	return s, nil
}

func validPlaceholder(p string) bool {
	rest, ok := strings.CutPrefix(p, placeholderPrefix)
	return ok && len(rest) == 32 && strings.Trim(rest, "0123456789abcdef") == ""
}

// loadCA rebuilds a CA from its certificate and key; an expired one is refused.
func loadCA(certDER, keyDER []byte) (*CA, error) {
	cert, err := x509.ParseCertificate(certDER)
	if err != nil {
		return nil, fmt.Errorf("inject: saved CA certificate: %w", err)
	}
	k, err := x509.ParsePKCS8PrivateKey(keyDER)
	if err != nil {
		return nil, fmt.Errorf("inject: saved CA key: %w", err)
	}
	key, ok := k.(*ecdsa.PrivateKey)
	if !ok || !key.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("inject: saved CA key does not match its certificate")
	}
	if !cert.IsCA || time.Now().After(cert.NotAfter) {
		return nil, fmt.Errorf("inject: saved CA is not a CA or expired at %s", cert.NotAfter.Format(time.RFC3339))
	}
	return &CA{
		cert: cert, key: key,
		pem:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: certDER}),
		leaves: map[string]*tls.Certificate{},
	}, nil
}
