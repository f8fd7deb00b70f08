package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/crackbox/crackbox/pkg/jail/guest"
)

// systemBundles are where distributions keep the CA bundle, first match wins.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt",
	"/etc/pki/tls/certs/ca-bundle.crt",
	"/etc/ssl/ca-bundle.pem",
	"/etc/ssl/cert.pem",
}

// writeTrustBundle writes the root's system bundle followed by ca to
// guest.TrustBundle, which the command's TLS clients are pointed at. The
// bundle lives on the run's tmpfs and is gone at power-off.
func writeTrustBundle(ca string) error {
	if ca == "" {
		return nil
	}
	var system []byte
	for _, p := range systemBundles {
		if b, err := os.ReadFile(p); err == nil {
			system = b
			break
		}
	}
	if len(system) > 0 && system[len(system)-1] != '\n' {
		system = append(system, '\n')
	}
	if err := os.MkdirAll(filepath.Dir(guest.TrustBundle), 0o755); err != nil {
		return fmt.Errorf("trust bundle: %w", err)
	}
	if err := os.WriteFile(guest.TrustBundle, append(system, ca...), 0o644); err != nil {
		return fmt.Errorf("trust bundle: %w", err)
	}
	return nil
}
