package natsauth

import (
	"errors"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/crackbox/crackbox/internal/natstest"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    Auth
		want error
	}{
		{"nothing", Auth{URL: "tls://n1:4222"}, ErrNoCredentials},
		{"nkey", Auth{URL: "tls://n1:4222", NKey: "/etc/n.nk"}, nil},
		{"creds", Auth{URL: "tls://n1:4222", Creds: "/etc/n.creds"}, nil},
		{"user in one URL", Auth{URL: "tls://n1:4222,tls://u:p@n2:4222"}, nil},
		{"both", Auth{URL: "tls://n1:4222", NKey: "a", Creds: "b"}, ErrTwoIdentities},
		{"insecure", Auth{URL: "nats://n1:4222", Insecure: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.a.Check("x.nkey")
			if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
				t.Fatalf("Check: %v, want %v", err, tc.want)
			}
			if tc.want == ErrNoCredentials && (!strings.Contains(err.Error(), "x.nkey") || !strings.Contains(err.Error(), Flag)) {
				t.Errorf("refusal %q names neither the setting nor %s", err, Flag)
			}
		})
	}
}

// Right credentials over plaintext are refused unless Insecure: the client
// insists on TLS, whatever the URL's scheme.
func TestOptionsRequireTLS(t *testing.T) {
	url, seed, _ := natstest.StartNKey(t)
	for _, insecure := range []bool{false, true} {
		o, err := Auth{URL: url, NKey: seed, Insecure: insecure}.Options()
		if err != nil {
			t.Fatal(err)
		}
		nc, err := nats.Connect(url, o...)
		switch {
		case insecure && err != nil:
			t.Errorf("insecure connect: %v", err)
		case !insecure && err == nil:
			t.Error("connected without TLS")
		case !insecure && !strings.Contains(Explain(err).Error(), Flag):
			t.Errorf("refusal %q does not name %s", Explain(err), Flag)
		}
		if nc != nil {
			nc.Close()
		}
	}
	if _, err := (Auth{NKey: "/nonexistent.nk"}).Options(); err == nil {
		t.Error("a missing seed file was accepted")
	}
}
