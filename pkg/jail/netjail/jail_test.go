package netjail

import (
	"context"
	"errors"
	"testing"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// Jail refuses, before any network or guest exists, secrets a run could not
// keep out of the guest.
func TestJailRefusesSecretsItCannotKeep(t *testing.T) {
	set, err := inject.New([]inject.Secret{{Name: "API_KEY", Hosts: []string{"api.example.com"}, Value: "value-long-enough"}})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		mode string
		env  []string
		want error
	}{
		{"no network", jail.NetNone, nil, ErrSecretNoNet},
		{"also in env", jail.NetProxyOnly, []string{"OTHER=1", "API_KEY=real"}, ErrSecretEnv},
	}
	for _, c := range cases {
		out, err := Jail(context.Background(), Job{
			Net:  Options{Mode: c.mode, Secrets: set},
			Spec: jail.Spec{Argv: []string{"true"}, Env: c.env},
		})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err %v, want %v", c.name, err, c.want)
		}
		if out.Exit != jail.ExitFailed || out.Net != nil {
			t.Errorf("%s: outcome %+v, want a failed run without network", c.name, out)
		}
	}
}
