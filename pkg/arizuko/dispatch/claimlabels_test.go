package dispatch

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// A runner that ignores the folder's required labels and claims anyway is
// refused by the control plane (403, audited): its registered labels lack
// kvm=true. A runner that has them runs the turn afterwards.
func TestClaimRefusedWithoutRequiredLabels(t *testing.T) {
	require := func(f string) []string {
		if f == "kvm" {
			return []string{"kvm=true"}
		}
		return nil
	}
	p := newPlane(t, true, 3*time.Second, require, nil, "kvm")
	nt, err := p.l.AddToken(service.WithPrincipal(p.ctx, service.AdminPrincipal), service.TokenIn{Name: "plain", Kind: service.KindRunner})
	if err != nil {
		t.Fatal(err)
	}
	plain := &Client{URL: p.url, Token: nt.Secret}
	p.post(t, "kvm", "x")

	// The rogue pulls the item as any runner can, registers without the
	// label, takes the folder's lease and claims.
	var it Item
	eventually.True(t, 30*time.Second, "the work item", func() bool {
		b, err := p.setup.Consumer.Fetch(1, jetstream.FetchMaxWait(time.Second))
		if err != nil {
			return false
		}
		for m := range b.Messages() {
			json.Unmarshal(m.Data(), &it)
			m.NakWithDelay(5 * time.Second)
		}
		return it.Dispatch != ""
	})
	adv, _ := json.Marshal(Advert{ID: "plain", Capacity: 1})
	if _, err := p.setup.Runners.Put(p.ctx, "plain", adv); err != nil {
		t.Fatal(err)
	}
	l, _ := json.Marshal(Lease{Runner: "plain", Turn: it.Turn, Attempt: it.Attempt, Dispatch: it.Dispatch})
	if _, err := p.setup.Leases.Create(p.ctx, LeaseKey("kvm"), l); err != nil {
		t.Fatal(err)
	}
	c := Claim{Turn: it.Turn, Attempt: it.Attempt, Dispatch: it.Dispatch, Folder: "kvm"}
	if w, err := plain.Claim(p.ctx, c); !errors.Is(err, ErrNotHolder) {
		t.Fatalf("claim by a runner without kvm=true: err %v, got prompt %q", err, w.Prompt)
	}
	rows, err := p.l.ListAudit(service.WithPrincipal(p.ctx, service.AdminPrincipal), 50)
	if err != nil {
		t.Fatal(err)
	}
	audited := false
	for _, r := range rows {
		audited = audited || (r.Principal == "runner:plain" && r.Action == "fleet:claim" && strings.Contains(r.Reason, "kvm=true"))
	}
	if !audited {
		t.Errorf("the refused claim is not audited: %+v", rows)
	}
	if err := p.setup.Leases.Delete(p.ctx, LeaseKey("kvm")); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var ran []string
	p.runner(t, "metal", []string{"kvm=true"}, recorder{name: "metal", mu: &mu, ran: &ran})
	eventually.True(t, 30*time.Second, "the kvm turn on metal", func() bool { return p.idle(t) })
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != "metal:kvm" {
		t.Fatalf("runs %v, want metal:kvm once", ran)
	}
}
