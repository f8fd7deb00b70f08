package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// What the chat user sees when nothing can answer: a turn that fails for
// good, a turn whose agent printed its answer and exited 0 without calling a
// reply tool, and a folder that does not exist. Each gives one clear line and
// a non-zero end.
func TestChatFailuresAreVisible(t *testing.T) {
	base, token, _ := chatDaemon(t, TurnsConfig{}, "a")
	cases := []struct {
		folder, in  string
		out, status string
	}{
		{"a", "FAIL\n", "a> arizuko: a could not answer", ""},
		{"a", "STDOUT printed, not sent\n", "a> arizuko: a ended its turn without answering", ""},
		{"nosuch", "hi\n", "", `not delivered: direct address web:nosuch, but folder "nosuch" does not exist`},
	}
	for _, c := range cases {
		var out, status bytes.Buffer
		s := &chatSession{base: base, token: token, folder: c.folder, chat: "web:" + c.folder, sender: "tester",
			in: strings.NewReader(c.in), out: &out, status: &status, poll: 50 * time.Millisecond}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		err := s.run(ctx)
		cancel()
		if !errors.Is(err, errChatFailed) {
			t.Errorf("%s: run = %v, want a failure (out %q status %q)", c.folder, err, out.String(), status.String())
		}
		if !strings.Contains(out.String(), c.out) || strings.Count(out.String(), "\n") > 1 || !strings.Contains(status.String(), c.status) {
			t.Errorf("%s: out %q status %q", c.folder, out.String(), status.String())
		}
	}
}

// `arizuko send` on a turn that went unanswered prints the notice and fails;
// with the folder's stdout reply on, it prints the agent's stdout and succeeds.
func TestSendUnansweredFails(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "a")
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	in := service.MessageIn{ChatJID: "web:a", Text: "STDOUT printed, not sent", Sender: "tester", Platform: chatPlatform}
	if err := sendAndWait(ctx, base, token, in, &out); !errors.Is(err, errChatFailed) || !strings.Contains(err.Error(), "1 ended without a reply") ||
		out.String() != "a> arizuko: a ended its turn without answering; the operator sees its output in `arizuko turns show 1`\n" {
		t.Fatalf("send = %v, printed %q", err, out.String())
	}
	on := true
	if err := st.UpdateFolder(ctx, "a", store.FolderChange{StdoutReply: &on}); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	if err := sendAndWait(ctx, base, token, in, &out); err != nil || out.String() != "a> printed, not sent\n" {
		t.Fatalf("send with the stdout reply = %v, printed %q", err, out.String())
	}
}
