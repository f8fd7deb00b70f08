package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// A rogue runner with a valid token rewrites the folder's lease in the KV
// bucket to name itself, then claims the live turn: the control plane's own
// record of the first accepted claim refuses it (403, audited), it gets no
// prompt, no secret and no tool session, and the honest runner's turn ends.
func TestFleetRogueRunnerCannotTakeOverLiveTurn(t *testing.T) {
	f := newFleet(t, map[string]string{"s": `sleep 8; exec python3 "$AGENT"`})
	f.startRunner("r1", f.runnerToken("r1"), 1)
	mallory := &dispatch.Client{URL: "http://" + f.addr, Token: f.runnerToken("mallory")}
	f.waitPulling("r1")
	f.say("s", "hi")
	nc := f.nats.Connect()
	var held dispatch.Lease
	f.waitFor(60*time.Second, "r1's claim of s", func() bool {
		var err error
		held, err = readLease(nc, "s")
		return err == nil && held.Runner == "r1" && strings.Contains(f.cpLogs.String(), "turn claimed")
	})

	// What any runner's NATS identity can do: write the folder's lease key.
	ctx := context.Background()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, dispatch.LeaseBucket)
	if err != nil {
		t.Fatal(err)
	}
	forged := held
	forged.Runner = "mallory"
	b, _ := json.Marshal(forged)
	if _, err := kv.Put(ctx, dispatch.LeaseKey("s"), b); err != nil {
		t.Fatal(err)
	}

	c := dispatch.Claim{Turn: held.Turn, Attempt: held.Attempt, Dispatch: held.Dispatch, Folder: "s"}
	w, err := mallory.Claim(ctx, c)
	if !errors.Is(err, dispatch.ErrNotHolder) {
		t.Errorf("mallory's claim of r1's live turn: err %v, got prompt %q secrets %v", err, w.Prompt, w.Secrets)
	}
	if rwc, err := mallory.Tunnel(ctx, c); !errors.Is(err, dispatch.ErrNotHolder) {
		if rwc != nil {
			rwc.Close()
		}
		t.Errorf("mallory opened a tool session of r1's turn: %v", err)
	}
	if err := mallory.Report(ctx, dispatch.Outcome{Claim: c, Exit: 0, Output: "forged"}); !errors.Is(err, dispatch.ErrNotHolder) {
		t.Errorf("mallory's outcome of r1's turn: %v, want refused", err)
	}

	admin := service.WithPrincipal(ctx, service.AdminPrincipal)
	f.waitFor(90*time.Second, "r1's turn to finish", func() bool {
		ts, err := f.client.ListTurns(admin, "s", 10)
		return err == nil && len(ts) == 1 && ts[0].Status == store.TurnDone
	})
	if rep := f.replies("s"); len(rep) != 1 || rep[0].Text != "echo: hi" {
		t.Fatalf("replies %+v, want r1's one reply", rep)
	}
	r1log := f.runners["r1"].logs.String()
	if strings.Contains(r1log, "lease lost") || !strings.Contains(r1log, "the control plane confirms this runner") {
		t.Errorf("r1 did not keep its turn and restore its lease over the forged one:\n%s", r1log)
	}
	rows, err := f.client.ListAudit(admin, 100)
	if err != nil {
		t.Fatal(err)
	}
	var audited []store.AuditEntry
	for _, r := range rows {
		if r.Principal == "runner:mallory" && strings.HasPrefix(r.Action, "fleet:") {
			audited = append(audited, r)
		}
	}
	if len(audited) < 3 {
		t.Fatalf("audit rows of mallory's refused requests: %+v, want claim, tool session and outcome", audited)
	}
	for _, r := range audited {
		t.Logf("audit row: %+v", r)
	}
}
