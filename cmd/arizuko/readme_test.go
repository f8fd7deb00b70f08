package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// The README's terminal paths, as written: a route on platform=term catches
// what a terminal sends, and `arizuko send` prints the reply, which reaches
// this process's own adapter rather than an adapter nobody registered.
func TestReadmeTerminalPaths(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "demo")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := daemonCall(ctx, base, token, "POST", "/v1/routes", router.Route{Seq: 10, Match: "platform=term", Target: "demo"}, nil); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	in := service.MessageIn{ChatJID: "term:alice", Text: "hello", Sender: "alice", Platform: chatPlatform}
	if err := sendAndWait(ctx, base, token, in, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "demo> echo: hello\n" {
		t.Fatalf("send printed %q", out.String())
	}
	var status bytes.Buffer
	out.Reset()
	c := &chatSession{base: base, token: token, folder: "demo", chat: "term:bob", sender: "bob",
		in: strings.NewReader("hi there\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); err != nil {
		t.Fatal(err)
	}
	if out.String() != "demo> echo: hi there\n" {
		t.Fatalf("chat printed %q (%s)", out.String(), status.String())
	}
	msgs, err := st.ListMessages(ctx, "term:bob", 0, 10)
	if err != nil || len(msgs) == 0 || msgs[0].Platform != chatPlatform || msgs[0].How != "route" {
		t.Fatalf("stored %+v %v", msgs, err)
	}
	// Nothing waits for an adapter that does not exist.
	for _, chat := range []string{"term:alice", "term:bob"} {
		var all []store.Message
		if !eventually.Within(10*time.Second, func() bool {
			all, _ = st.ListMessages(ctx, chat, 0, 10)
			return len(all) == 2 && all[1].Direction == "out" && all[1].Status == "sent"
		}) {
			t.Fatalf("%s: reply not delivered: %+v", chat, all)
		}
	}
}
