package turn

import (
	"context"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// A folder secret that does not open under the ring fails the turn at once,
// as failed with no exit code and no attempt (no guest ran);
// once the secret opens again the requeued turn runs and answers.
func TestSecretThatDoesNotOpenFailsThenRequeues(t *testing.T) {
	e := newEnv(t, "", "a")
	ctx := context.Background()
	if err := e.l.SetSecret(e.ctx, service.SecretIn{Scope: "folder:a", Name: "K", Value: "value-of-k"}); err != nil {
		t.Fatal(err)
	}
	good, _ := e.st.SecretRows(ctx, "folder", "a")
	keys, _ := secrets.ParseKeys(secrets.GenerateKey())
	other, _ := secrets.NewRing(keys...)
	bad, _ := other.Seal(secrets.AAD("folder", "a", "K"), []byte("v"))
	if err := e.st.PutSecret(ctx, store.SecretRow{ScopeKind: "folder", ScopeID: "a", Name: "K", Value: bad}); err != nil {
		t.Fatal(err)
	}
	r := newBlockRunner()
	e.start(t, r, nil)
	e.post(t, "web:a", "hi")
	ts := e.waitTurns(t, "a", 1)
	if x := ts[0]; x.Status != store.TurnFailed || x.Outcome != OutcomeNoSecrets || x.ExitCode != nil || x.Attempts != 0 {
		t.Fatalf("turn %+v", x)
	}
	if err := e.st.PutSecret(ctx, good[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := e.st.RequeueTurns(ctx, OutcomeNoSecrets); err != nil || n != 1 {
		t.Fatalf("requeued %d %v", n, err)
	}
	e.q.Kick("a")
	recv(t, r.started)
	r.release <- struct{}{}
	ts = e.waitTurns(t, "a", 1)
	if x := ts[0]; x.Status != store.TurnDone || x.ExitCode == nil || *x.ExitCode != 0 {
		t.Fatalf("requeued turn %+v", x)
	}
}
