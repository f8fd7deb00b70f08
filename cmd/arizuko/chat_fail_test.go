package main

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// What the chat user sees when nothing can answer: a turn that fails for
// good, and a folder that does not exist. Each gives one clear line and a
// non-zero end.
func TestChatFailuresAreVisible(t *testing.T) {
	base, token, _ := chatDaemon(t, TurnsConfig{}, "a")
	cases := []struct {
		folder, in  string
		out, status string
	}{
		{"a", "FAIL\n", "a> arizuko: a could not answer", ""},
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
