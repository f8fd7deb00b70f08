package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// An out-of-tree adapter registered over the API hears, for one inbound
// message, typing on first, then the reply (signed, keyed) and typing off
// (those two race: the reply goes out as soon as the agent writes it); its
// retried inbound POST runs no second turn.
func TestAdapterHearsTypingAndReply(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "desk")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var heard []string
	note := func(s string) { mu.Lock(); heard = append(heard, s); mu.Unlock() }
	h := &adapter.Handler{Secret: "kit-secret-0123456789",
		Send: func(_ context.Context, d adapter.Delivery) (string, error) {
			note("send " + d.Text)
			return "m1", nil
		},
		Typing: func(_ context.Context, ty adapter.Typing) error {
			note(map[bool]string{true: "typing on", false: "typing off"}[ty.Typing] + " " + ty.ChatJID)
			return nil
		}}
	srv := httptest.NewServer(h)
	defer srv.Close()
	if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/adapters", store.Adapter{Platform: "kit", CallbackURL: srv.URL, Secret: h.Secret}, nil); err != nil {
		t.Fatal(err)
	}
	if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/routes", router.Route{Seq: 10, Match: "platform=kit", Target: "desk"}, nil); err != nil {
		t.Fatal(err)
	}
	in := service.MessageIn{ChatJID: "kit:1", Platform: "kit", Sender: "kit:u", Text: "ping", PlatformID: "evt-1"}
	for i := range 2 { // the second is an adapter's retry
		var ing service.Ingest
		if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/messages", in, &ing); err != nil {
			t.Fatal(err)
		}
		if ing.Duplicate != (i == 1) {
			t.Fatalf("post %d: duplicate %v, want only the retry a duplicate", i+1, ing.Duplicate)
		}
	}
	want := []string{"typing on kit:1", "send echo: ping", "typing off kit:1"}
	// Once the one turn has ended and its reply is marked sent, nothing more
	// can reach the adapter: the retry started no turn and a sent reply is not
	// sent again.
	eventually.True(t, time.Minute, "the turn ends, its reply is sent and the adapter hears it", func() bool {
		ts, err := st.ListTurns(ctx, "desk", 10)
		if err != nil || len(ts) != 1 || ts[0].EndedAt == 0 {
			return false
		}
		outs, err := st.TurnOutbound(ctx, ts[0].ID)
		if err != nil || len(outs) == 0 {
			return false
		}
		for _, o := range outs {
			if o.Status != "sent" {
				return false
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return len(heard) >= len(want)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(heard) != len(want) || heard[0] != want[0] || !slices.Contains(heard, want[1]) || !slices.Contains(heard, want[2]) {
		t.Fatalf("the adapter heard %q, want %q (the last two in either order)", heard, want)
	}
	if ts, _ := st.ListTurns(ctx, "desk", 10); len(ts) != 1 {
		t.Fatalf("%d turns for one message posted twice", len(ts))
	}
}
