package service

import (
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/secrets"
)

// TestSecretInjectionWouldRefuse: a value shorter than injection takes is
// refused when it is set, naming the minimum and why, and nothing is stored.
func TestSecretInjectionWouldRefuse(t *testing.T) {
	l, admin := newLocal(t, ringT(t, secrets.GenerateKey()))
	mustFolders(t, l, admin, "acme")
	err := l.SetSecret(admin, SecretIn{Scope: "folder:acme", Name: "K", Value: "1234567"})
	if Code(err) != CodeInvalid || !strings.Contains(err.Error(), "7 bytes") || !strings.Contains(err.Error(), "at least 8") || !strings.Contains(err.Error(), "scrubbed") {
		t.Fatalf("7-byte secret: %v", err)
	}
	if names, _ := l.ListSecrets(admin, "folder:acme"); len(names) != 0 {
		t.Fatalf("refused secret stored: %+v", names)
	}
	if err := l.SetSecret(admin, SecretIn{Scope: "folder:acme", Name: "K", Value: "12345678"}); err != nil {
		t.Fatalf("8-byte secret: %v", err)
	}
}
