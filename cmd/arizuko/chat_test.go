package main

import (
	"bytes"
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// The daemon's handler with the turn pipeline, and the terminal chat as the
// adapter: a typed line runs a turn whose reply is delivered to the chat.
func TestChatThroughPipeline(t *testing.T) {
	ctx := context.Background()
	base, token, _ := chatDaemon(t, TurnsConfig{}, "a")

	// The extra endpoints share the core API's auth and envelope.
	resp, err := http.Get(base + "/v1/turns")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("unauthenticated /v1/turns: %v %v", resp.Status, err)
	}
	resp.Body.Close()
	if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/adapters", store.Adapter{Platform: "x", CallbackURL: "ftp://nope"}, nil); service.Code(err) != service.CodeInvalid {
		t.Fatalf("bad callback accepted: %v", err)
	}

	var out, status bytes.Buffer
	c := &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("hello folder\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := c.run(cctx); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); got != "a> echo: hello folder\n" {
		t.Fatalf("chat printed %q (status %q)", got, status.String())
	}
	var ts []store.Turn
	if err := daemonCall(ctx, base, token, http.MethodGet, "/v1/turns?folder=a", nil, &ts); err != nil || len(ts) != 1 || ts[0].Status != store.TurnDone {
		t.Fatalf("turns %+v %v", ts, err)
	}
	var d service.TurnDetail
	eventually.Within(time.Minute, func() bool {
		if err := daemonCall(ctx, base, token, http.MethodGet, "/v1/turns/1", nil, &d); err != nil {
			t.Fatal(err)
		}
		return len(d.Outbound) != 1 || d.Outbound[0].Status != "pending"
	})
	if len(d.Messages) != 1 || d.Messages[0].Text != "hello folder" || len(d.Outbound) != 1 || d.Outbound[0].Status != "sent" {
		t.Fatalf("turn detail %+v", d)
	}
}
