package slackadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/internal/slacktest"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

const (
	signing  = "slack-signing-secret"
	contract = "arizuko-contract-secret-0123"
)

type rig struct {
	slack *slacktest.Server
	st    *store.Store
	srv   *httptest.Server // the adapter
}

// newRig runs the adapter between a fake Slack and a real arizuko API that
// it posts to with an adapter token for platform slack.
func newRig(t *testing.T) *rig {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{})
	tok, err := e.L.AddToken(e.Admin, service.TokenIn{Name: "slack", Kind: service.KindAdapter, Platform: Platform})
	if err != nil {
		t.Fatal(err)
	}
	daemon := httptest.NewServer(api.NewServer(e.L, nil).WithTokens(e.L))
	t.Cleanup(daemon.Close)
	f := slacktest.New(t)
	a, err := New(context.Background(), Options{SigningSecret: signing, BotToken: f.Token, APIURL: f.URL(), Secret: contract,
		Post: PostTo(daemon.URL, tok.Secret, http.DefaultClient), MaxWait: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if a.BotUser() != "UBOT" {
		t.Fatalf("bot user %q from auth.test", a.BotUser())
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(srv.Close)
	return &rig{slack: f, st: e.Store, srv: srv}
}

// event POSTs a Slack event body signed at ts with secret; the empty secret sends it unsigned.
func (r *rig) event(t *testing.T, body string, secret string, ts time.Time, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("POST", r.srv.URL+PathEvents, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if secret != "" {
		req.Header.Set("X-Slack-Request-Timestamp", strconv.FormatInt(ts.Unix(), 10))
		req.Header.Set("X-Slack-Signature", slacktest.Sign(secret, ts.Unix(), []byte(body)))
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func message(fields string) string {
	return `{"type":"event_callback","team_id":"T1","event_id":"Ev1","event_time":1800000000,"event":{"type":"message","channel":"C1",` + fields + `}}`
}

func (r *rig) stored(t *testing.T, chat string) []store.Message {
	ms, err := r.st.ListMessages(context.Background(), chat, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	return ms
}

func TestEventsInbound(t *testing.T) {
	r := newRig(t)
	now := time.Now()
	if code, body := r.event(t, `{"type":"url_verification","token":"x","challenge":"chal-123"}`, signing, now); code != 200 || body != "chal-123" {
		t.Fatalf("url_verification: %d %q", code, body)
	}
	top := message(`"user":"U1","text":"hello bot","ts":"1700000000.000100"`)
	for _, tc := range []struct {
		name   string
		secret string
		at     time.Time
	}{{"unsigned", "", now}, {"wrong secret", "not-" + signing, now}, {"stale timestamp", signing, now.Add(-6 * time.Minute)}} {
		if code, _ := r.event(t, top, tc.secret, tc.at); code != http.StatusUnauthorized {
			t.Errorf("%s event: %d, want 401", tc.name, code)
		}
	}
	if ms := r.stored(t, "slack:C1/1700000000.000100"); len(ms) != 0 {
		t.Fatalf("refused events stored %d messages", len(ms))
	}

	chat := "slack:C1/1700000000.000100"
	if code, _ := r.event(t, top, signing, now); code != 200 {
		t.Fatalf("message event: %d", code)
	}
	// Slack retries an event it thinks was lost: still one message.
	if code, _ := r.event(t, top, signing, now, "X-Slack-Retry-Num", "1", "X-Slack-Retry-Reason", "http_timeout"); code != 200 {
		t.Fatalf("retried event: %d", code)
	}
	// A reply in the thread joins the thread's chat.
	r.event(t, message(`"user":"U2","text":"me too","ts":"1700000000.000200","thread_ts":"1700000000.000100"`), signing, now)
	// The loop guard: its own post, another bot's, an edit: none inbound.
	r.event(t, message(`"user":"UBOT","text":"echo: hello bot","ts":"1700000000.000300","thread_ts":"1700000000.000100"`), signing, now)
	r.event(t, message(`"bot_id":"B9","username":"otherbot","text":"beep","ts":"1700000000.000400","thread_ts":"1700000000.000100"`), signing, now)
	r.event(t, message(`"subtype":"message_changed","hidden":true,"ts":"1700000000.000500","message":{"user":"U1","text":"edited","ts":"1700000000.000100"}`), signing, now)

	ms := r.stored(t, chat)
	if len(ms) != 2 {
		t.Fatalf("chat %s holds %d messages, want the two people's: %+v", chat, len(ms), ms)
	}
	for i, want := range []struct{ sender, text, id string }{{"slack:U1", "hello bot", "1700000000.000100"}, {"slack:U2", "me too", "1700000000.000200"}} {
		if m := ms[i]; m.Sender != want.sender || m.Text != want.text || m.PlatformID != want.id || m.Platform != Platform || m.Room != "C1" {
			t.Errorf("message %d: %+v, want %+v", i, m, want)
		}
	}
}

// signedCall makes one contract call to the adapter as the daemon does.
func (r *rig) signedCall(t *testing.T, path string, v any) (int, adapter.Answer) {
	t.Helper()
	body, _ := json.Marshal(v)
	req, _ := http.NewRequest("POST", r.srv.URL+PathContract+path, bytes.NewReader(body))
	adapter.Sign(req.Header, contract, time.Now(), body)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a adapter.Answer
	json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a
}

func TestContractOutbound(t *testing.T) {
	r := newRig(t)
	chat := "slack:C1/1700000000.000100"
	rs, err := adapter.Check(context.Background(), adapter.KitConfig{URL: r.srv.URL + PathContract, Secret: contract, Chat: chat})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	adapter.PrintTable(&table, rs)
	if !adapter.Passed(rs) {
		t.Fatalf("the slack adapter fails the conformance kit:\n%s", table.String())
	}
	t.Logf("slack adapter conformance:\n%s", table.String())
	// The inbound half: the adapter, pointed at the kit's inbox, posts a
	// message Slack delivers twice under one key.
	inbox := &adapter.Inbox{}
	daemon := httptest.NewServer(inbox)
	defer daemon.Close()
	f := slacktest.New(t)
	sa, err := New(context.Background(), Options{SigningSecret: signing, BotToken: f.Token, APIURL: f.URL(), Secret: contract,
		Post: PostTo(daemon.URL, "azk_test", http.DefaultClient)})
	if err != nil {
		t.Fatal(err)
	}
	in := &rig{srv: httptest.NewServer(sa.Handler())}
	defer in.srv.Close()
	inbox.Trigger = func(ctx context.Context, text string) error {
		body := message(`"user":"U1","text":"` + text + `","ts":"1700000009.000100"`)
		for range 2 {
			if code, _ := in.event(t, body, signing, time.Now()); code != 200 {
				return fmt.Errorf("event answered %d", code)
			}
		}
		return nil
	}
	rs, err = adapter.Check(context.Background(), adapter.KitConfig{URL: in.srv.URL + PathContract, Secret: contract, Chat: chat, Inbox: inbox})
	if err != nil {
		t.Fatal(err)
	}
	if last := rs[len(rs)-1]; !adapter.Passed(rs) || !strings.HasPrefix(last.Case, "inbound:") {
		table.Reset()
		adapter.PrintTable(&table, rs)
		t.Fatalf("the slack adapter fails the kit's inbound case:\n%s", table.String())
	}

	posts, updates, _ := r.slack.Sent()
	if len(posts) != 3 {
		t.Fatalf("Slack got %d posts, want 3 (first, second, attachment; the retry none): %+v", len(posts), posts)
	}
	for _, p := range posts {
		if p.Channel != "C1" || p.ThreadTS != "1700000000.000100" {
			t.Errorf("post %+v, want channel C1 in thread 1700000000.000100", p)
		}
	}
	if !strings.Contains(posts[2].Text, "<https://example.invalid/report.txt|report.txt>") {
		t.Errorf("the attachment's post %q has no link to it", posts[2].Text)
	}
	if len(updates) != 1 || updates[0].TS != posts[0].TS || updates[0].Text != "edited by the conformance check" {
		t.Errorf("updates %+v, want one of %s", updates, posts[0].TS)
	}

	// A 429 is waited out for its Retry-After, then posted once.
	r.slack.Limit(1)
	code, a := r.signedCall(t, adapter.PathSend, adapter.Delivery{ID: 50, Key: "k-429", ChatJID: chat, Text: "after the limit"})
	posts, _, tries := r.slack.Sent()
	if code != 200 || a.PlatformID != "C1/"+posts[len(posts)-1].TS || posts[len(posts)-1].Text != "after the limit" {
		t.Fatalf("rate-limited send: %d %+v, last post %+v", code, a, posts[len(posts)-1])
	}
	if gap := tries[len(tries)-1].Sub(tries[len(tries)-2]); gap < time.Second {
		t.Fatalf("retried %s after a 429 with Retry-After: 1", gap)
	}
	// A Retry-After longer than the adapter waits goes back to the daemon.
	r.slack.Limit(5)
	code, _ = r.signedCall(t, adapter.PathSend, adapter.Delivery{ID: 51, Key: "k-429-long", ChatJID: chat, Text: "x"})
	if code != http.StatusTooManyRequests {
		t.Fatalf("a lasting limit answered %d, want 429", code)
	}
	r.slack.Limit(0)
	// A channel Slack does not know is 410: the daemon gives up at once.
	if code, _ := r.signedCall(t, adapter.PathSend, adapter.Delivery{ID: 52, Key: "k-gone", ChatJID: "slack:CGONE/1.0", Text: "x"}); code != http.StatusGone {
		t.Fatalf("channel_not_found answered %d, want 410", code)
	}
	if code, _ := r.signedCall(t, adapter.PathSend, adapter.Delivery{ID: 53, Key: "k-bad", ChatJID: "tg:123", Text: "x"}); code != http.StatusNotFound {
		t.Fatalf("a non-slack chat answered %d, want 404", code)
	}
}
