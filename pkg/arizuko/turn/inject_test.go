package turn

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// What the runner is handed: an inject grant moves the secret from the
// environment to Job.Secrets even where shell:env or a credential key would
// pass it, for the granted folder alone; a grant without its secret fails.
func TestInjectGrantShapesJob(t *testing.T) {
	e := newEnv(t, "", "a", "b")
	for _, s := range []service.SecretIn{
		{Scope: "folder:a", Name: "K", Value: "value-of-k-1234"},
		{Scope: "folder:b", Name: "K", Value: "value-of-k-1234"},
		{Scope: "folder:a", Name: "PLAIN", Value: "plain-value"},
	} {
		if err := e.l.SetSecret(e.ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, g := range []acl.Grant{
		{Principal: "folder:a", Action: "inject:K@api.one.test", Scope: "a"},
		{Principal: "folder:a", Action: "inject:K@api.two.test", Scope: "{self}"},
		{Principal: "folder:a", Action: "shell:env:K", Scope: "a"},
		{Principal: "folder:a", Action: "shell:env:PLAIN", Scope: "a"},
	} {
		g.Effect = acl.Allow
		if _, err := e.l.AddGrant(e.ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	q := New(Options{Store: e.st, Gate: e.l.Gate(), Control: e.l, CredentialKeys: []string{"K"}})
	// The folder's own settings come through, but none replaces the turn's
	// identity or an injected secret's placeholder.
	env, inj, err := q.env(context.Background(), store.Turn{Folder: "a"}, []string{"K=folder-set", "ARIZUKO_FOLDER=b", "MCP_X=1"}, "s", "web:a")
	if err != nil {
		t.Fatal(err)
	}
	if want := []inject.Secret{{Name: "K", Hosts: []string{"api.one.test", "api.two.test"}, Value: "value-of-k-1234"}}; !reflect.DeepEqual(inj, want) {
		t.Errorf("a: injections %+v, want %+v", inj, want)
	}
	joined := strings.Join(env, "\n")
	if !slices.Contains(env, "MCP_X=1") || strings.Contains(joined, "K=folder-set") || strings.Contains(joined, "ARIZUKO_FOLDER=b") {
		t.Errorf("a: the folder's environment was not merged under the host's: %q", env)
	}
	if strings.Contains(joined, "value-of-k") || !strings.Contains(joined, "PLAIN=plain-value") {
		t.Errorf("a: env %q: want PLAIN and no K", env)
	}
	env, inj, err = q.env(context.Background(), store.Turn{Folder: "b"}, nil, "s", "web:b")
	if err != nil || len(inj) != 0 {
		t.Errorf("b: injections %+v %v, want none", inj, err)
	}
	if !strings.Contains(strings.Join(env, "\n"), "K=value-of-k-1234") {
		t.Errorf("b: env %q: its credential key K passes as before", env)
	}

	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:b", Action: "inject:GONE@api.one.test", Scope: "b", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	_, _, err = q.env(context.Background(), store.Turn{Folder: "b"}, nil, "s", "web:b")
	if !errors.Is(err, ErrSecretMissing) || !errors.Is(err, ErrTerminal) || !strings.Contains(err.Error(), "GONE") {
		t.Errorf("b with a grant for a missing secret: %v", err)
	}
}
