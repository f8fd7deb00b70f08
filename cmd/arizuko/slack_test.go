package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/slacktest"
	"github.com/crackbox/crackbox/pkg/router"
)

// A Slack message reaches a folder through `arizuko adapter slack`, a turn
// answers it, and the answer is posted in the message's thread through the
// Slack Web API (a loopback stand-in); the bot's own post coming back as an
// event starts nothing. The adapter then passes `arizuko adapter test`, and
// fails it with the wrong secret.
func TestSlackRoundTrip(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "team")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/routes", router.Route{Seq: 10, Match: "platform=slack", Target: "team"}, nil); err != nil {
		t.Fatal(err)
	}
	fake := slacktest.New(t)
	addr := make(chan string, 1)
	r := &slackRun{listen: "127.0.0.1:0", apiURL: fake.URL(), base: base, token: token, signing: "signing-secret", bot: fake.Token,
		maxWait: 5 * time.Second, ready: func(a string) { addr <- a }}
	done := make(chan error, 1)
	go func() { done <- r.run(ctx) }()
	var events string
	select {
	case a := <-addr:
		events = "http://" + a + "/slack/events"
	case err := <-done:
		t.Fatalf("adapter: %v", err)
	}
	post := func(body string) {
		ts := time.Now().Unix()
		req, _ := http.NewRequest("POST", events, strings.NewReader(body))
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts, 10))
		req.Header.Set("X-Slack-Signature", slacktest.Sign("signing-secret", ts, []byte(body)))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("event answered %s", resp.Status)
		}
	}
	ev := func(inner string) string {
		return `{"type":"event_callback","team_id":"T1","event_id":"Ev` + strconv.FormatInt(time.Now().UnixNano(), 10) + `","event":{"type":"message","channel":"C1",` + inner + `}}`
	}
	start := time.Now()
	post(ev(`"user":"U1","text":"hello","ts":"1700000000.000100"`))
	var posts []slacktest.Post
	eventually.True(t, time.Minute, "the threaded reply is posted", func() bool {
		posts, _, _ = fake.Sent()
		return len(posts) > 0
	})
	if len(posts) != 1 || posts[0].Channel != "C1" || posts[0].ThreadTS != "1700000000.000100" || posts[0].Text != "echo: hello" {
		t.Fatalf("Slack got %+v, want one echo in thread 1700000000.000100 of C1", posts)
	}
	t.Logf("slack message → turn → threaded reply: %s", time.Since(start).Round(time.Millisecond))

	// The reply comes back as an event, as Slack sends a bot its own posts.
	post(ev(`"user":"UBOT","text":"echo: hello","ts":"` + posts[0].TS + `","thread_ts":"1700000000.000100"`))
	// The adapter answers an event once it has stored or dropped it, so the
	// thread's chat is final here: with no message for the bot's own post no
	// turn can answer it, and once the one turn has ended nothing more goes out.
	ms, _ := st.ListMessages(ctx, "slack:C1/1700000000.000100", 0, 0)
	if len(ms) != 2 {
		t.Fatalf("the thread's chat holds %d messages, want the question and its answer", len(ms))
	}
	eventually.True(t, time.Minute, "the turn ends", func() bool {
		ts, err := st.ListTurns(ctx, "team", 10)
		return err == nil && len(ts) == 1 && ts[0].EndedAt != 0
	})
	if ps, _, _ := fake.Sent(); len(ps) != 1 {
		t.Fatalf("the bot answered its own post: %+v", ps)
	}

	a, err := st.GetAdapter(ctx, "slack")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		secret string
		want   error
	}{{a.Secret, nil}, {a.Secret + "x", errNotConforming}} {
		root := newRootCmd()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{"adapter", "test", a.CallbackURL, "--secret", tc.secret, "--chat", "slack:C1/1700000000.000100"})
		if err := root.ExecuteContext(ctx); !errors.Is(err, tc.want) {
			t.Fatalf("adapter test with secret ok=%v: %v, want %v\n%s", tc.want == nil, err, tc.want, out.String())
		}
		if tc.want == nil {
			t.Logf("arizuko adapter test:\n%s", out.String())
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
