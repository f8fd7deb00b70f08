// Package slackadapter carries a Slack workspace to arizuko over the adapter
// contract (pkg/arizuko/adapter). Inbound, it serves Slack's Events API: every
// request's signature (X-Slack-Signature v0, five-minute timestamp window)
// is checked, url_verification is answered, and a person's message becomes
// an inbound message of chat "slack:<channel>/<thread>", a thread being one
// chat; bots and its own posts are dropped so it never answers itself.
// Outbound, it posts replies with chat.postMessage in the thread, edits with
// chat.update, and waits out Slack's 429 Retry-After. It uses the
// slack-go/slack client for the Web API and the signature.
package slackadapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/slack-go/slack"
	"github.com/slack-go/slack/slackevents"

	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// Platform is the platform of Slack chats.
const Platform = "slack"

// Paths the adapter serves: Slack's event requests, and the contract's
// calls under the callback URL base+PathContract.
const (
	PathEvents   = "/slack/events"
	PathContract = "/arizuko"
)

// DefaultMaxWait is the longest Retry-After waited out in place; a longer
// one goes back to the daemon as a 429.
const DefaultMaxWait = 10 * time.Second

// Inbound posts a message to arizuko (POST /v1/messages with the adapter's
// token); it returns an error when arizuko did not store it.
type Inbound func(ctx context.Context, in service.MessageIn) error

// Options configure an Adapter.
type Options struct {
	SigningSecret string // Slack's signing secret for the Events API
	BotToken      string // the bot's xoxb token for the Web API
	APIURL        string // the Web API base, ending in "/"; "" is Slack's
	Secret        string // the contract's secret arizuko signs its calls with
	Post          Inbound
	HTTPClient    *http.Client
	MaxWait       time.Duration // 0 = DefaultMaxWait
	Log           *slog.Logger  // nil discards
}

// Adapter is one Slack workspace's adapter.
type Adapter struct {
	o        Options
	api      *slack.Client
	botUser  string
	contract *adapter.Handler
}

// New checks the bot token with auth.test (which also names the bot's own
// user, for the loop guard) and returns the adapter.
func New(ctx context.Context, o Options) (*Adapter, error) {
	switch {
	case o.SigningSecret == "":
		return nil, errors.New("slack: the signing secret is required (Slack app → Basic Information → Signing Secret; $SLACK_SIGNING_SECRET)")
	case o.BotToken == "":
		return nil, errors.New("slack: the bot token is required (OAuth & Permissions → Bot User OAuth Token, xoxb-…; $SLACK_BOT_TOKEN)")
	case o.Secret == "":
		return nil, errors.New("slack: the adapter secret arizuko signs its calls with is required")
	case o.Post == nil:
		return nil, errors.New("slack: no way to post inbound messages to arizuko")
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	opts := []slack.Option{slack.OptionHTTPClient(o.HTTPClient)}
	if o.APIURL != "" {
		opts = append(opts, slack.OptionAPIURL(o.APIURL))
	}
	a := &Adapter{o: o, api: slack.New(o.BotToken, opts...)}
	who, err := a.api.AuthTestContext(ctx)
	if err != nil {
		return nil, fmt.Errorf("slack auth.test: %w (check the bot token)", err)
	}
	a.botUser = who.UserID
	a.contract = &adapter.Handler{Secret: o.Secret, Send: a.send, Edit: a.edit, Log: o.Log,
		// The Events API gives bots no typing indicator: the hint is accepted and dropped.
		Typing: func(context.Context, adapter.Typing) error { return nil }}
	return a, nil
}

// BotUser is the bot's own Slack user id.
func (a *Adapter) BotUser() string { return a.botUser }

// Handler serves Slack's events and the contract's calls.
func (a *Adapter) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+PathEvents, a.events)
	mux.Handle(PathContract+"/", a.contract)
	return mux
}

// events serves one Events API request.
func (a *Adapter) events(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, adapter.MaxBody))
	if err != nil {
		http.Error(w, "body too large", http.StatusRequestEntityTooLarge)
		return
	}
	sv, err := slack.NewSecretsVerifier(r.Header, a.o.SigningSecret)
	if err == nil {
		sv.Write(body)
		err = sv.Ensure()
	}
	if err != nil {
		a.o.Log.Warn("slack event refused", "remote", r.RemoteAddr, "err", err)
		http.Error(w, "bad slack signature", http.StatusUnauthorized)
		return
	}
	ev, err := slackevents.ParseEvent(json.RawMessage(body), slackevents.OptionNoVerifyToken())
	if err != nil {
		http.Error(w, "malformed event: "+err.Error(), http.StatusBadRequest)
		return
	}
	switch ev.Type {
	case slackevents.URLVerification:
		var c slackevents.ChallengeResponse
		json.Unmarshal(body, &c)
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, c.Challenge)
		return
	case slackevents.CallbackEvent:
	default:
		w.WriteHeader(http.StatusOK)
		return
	}
	m, ok := ev.InnerEvent.Data.(*slackevents.MessageEvent)
	if !ok || !a.fromPerson(m) {
		w.WriteHeader(http.StatusOK)
		return
	}
	thread := m.ThreadTimeStamp
	if thread == "" {
		thread = m.TimeStamp // a new message starts the thread the reply goes to
	}
	in := service.MessageIn{ChatJID: Platform + ":" + m.Channel + "/" + thread, Platform: Platform, Room: m.Channel,
		Sender: Platform + ":" + m.User, Text: m.Text, PlatformID: m.TimeStamp, ReplyTo: m.TimeStamp}
	if err := a.o.Post(r.Context(), in); err != nil {
		// Slack retries a failed event, and the message's ts keeps the retry
		// from being stored twice.
		a.o.Log.Error("slack message not stored", "chat", in.ChatJID, "err", err)
		http.Error(w, "arizuko did not store the message", http.StatusServiceUnavailable)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// fromPerson is the loop guard: only a person's new message is inbound;
// bots (this one included), edits, joins and deletions are not.
func (a *Adapter) fromPerson(m *slackevents.MessageEvent) bool {
	return m.SubType == "" && m.BotID == "" && m.User != "" && m.User != a.botUser && m.Channel != "" && m.TimeStamp != ""
}

// where is the channel and thread of a "slack:<channel>/<thread>" chat.
func where(chat string) (string, string, error) {
	rest, ok := strings.CutPrefix(chat, Platform+":")
	ch, thread, _ := strings.Cut(rest, "/")
	if !ok || ch == "" {
		return "", "", fmt.Errorf("chat %q is not slack:<channel>[/<thread>]: %w", chat, adapter.ErrUnknownChat)
	}
	return ch, thread, nil
}

func (a *Adapter) send(ctx context.Context, d adapter.Delivery) (string, error) {
	ch, thread, err := where(d.ChatJID)
	if err != nil {
		return "", err
	}
	text := d.Text
	for _, at := range d.Attachments {
		text += fmt.Sprintf("\n<%s|%s>", at.URL, at.Name) // Slack links files it cannot fetch itself
	}
	opts := []slack.MsgOption{slack.MsgOptionText(text, false)}
	if thread != "" {
		opts = append(opts, slack.MsgOptionTS(thread))
	}
	var ts string
	err = a.polite(ctx, func() error {
		var err error
		_, ts, err = a.api.PostMessageContext(ctx, ch, opts...)
		return err
	})
	if err != nil {
		return "", err
	}
	return ch + "/" + ts, nil
}

func (a *Adapter) edit(ctx context.Context, e adapter.Edit, platformID string) error {
	ch, ts, ok := strings.Cut(platformID, "/")
	if !ok {
		return fmt.Errorf("platform id %q: %w", platformID, adapter.ErrGone)
	}
	return a.polite(ctx, func() error {
		_, _, _, err := a.api.UpdateMessageContext(ctx, ch, ts, slack.MsgOptionText(e.Text, false))
		return err
	})
}

// polite runs call, waiting out a 429's Retry-After while it is short and
// handing a long one back to the daemon; Slack's errors that no retry mends
// are ErrGone.
func (a *Adapter) polite(ctx context.Context, call func() error) error {
	for range 3 {
		err := call()
		var rl *slack.RateLimitedError
		if !errors.As(err, &rl) {
			return permanent(err)
		}
		wait := max(rl.RetryAfter, time.Second)
		if wait > a.o.MaxWait {
			return &adapter.RateLimited{RetryAfterSeconds: int(wait.Round(time.Second) / time.Second)}
		}
		a.o.Log.Info("slack rate limited; waiting", "retry_after", wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return &adapter.RateLimited{RetryAfterSeconds: int(a.o.MaxWait / time.Second)}
}

func permanent(err error) error {
	var se slack.SlackErrorResponse
	if errors.As(err, &se) {
		switch se.Err {
		case "channel_not_found", "is_archived", "message_not_found", "cant_update_message", "msg_too_long", "no_text":
			return fmt.Errorf("slack: %s: %w", se.Err, adapter.ErrGone)
		}
	}
	return err
}

// PostTo is an Inbound that POSTs to the daemon at base with token.
func PostTo(base, token string, client *http.Client) Inbound {
	return func(ctx context.Context, in service.MessageIn) error {
		body, _ := json.Marshal(in)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/messages", bytes.NewReader(body))
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(adapter.HeaderIdempotency, in.PlatformID)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("arizuko answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
		}
		return nil
	}
}
