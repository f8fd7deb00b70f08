// Package delivery moves outbound messages to their adapters as the adapter
// contract (pkg/arizuko/adapter) says: each is stored pending first, POSTed signed to
// <adapter>/send (an edit to /edit) with an idempotency key stable across
// retries, retried with growing gaps (no sooner than a 429's Retry-After)
// and marked failed after a bound or at once on 410. The state lives in the
// store, so a restarted daemon picks up where the last one stopped.
package delivery

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// Defaults.
const (
	DefaultMaxAttempts = 8
	DefaultBaseDelay   = time.Second
	DefaultMaxDelay    = 5 * time.Minute
	DefaultPoll        = 5 * time.Second
)

// ErrBadCallback is a callback URL the daemon will not POST to.
var ErrBadCallback = errors.New("bad adapter callback url")

// Options configure a Deliverer.
type Options struct {
	Store       *store.Store
	Client      *http.Client  // nil: a client with a 30 s timeout
	MaxAttempts int           // attempts before a message is failed; 0 = DefaultMaxAttempts
	BaseDelay   time.Duration // gap after the first failure, doubling; 0 = DefaultBaseDelay
	MaxDelay    time.Duration // 0 = DefaultMaxDelay
	Poll        time.Duration // longest sleep between passes; 0 = DefaultPoll
	Log         *slog.Logger  // nil discards
	// Now is the clock that says which messages are due and when a retry is; nil is
	// time.Now. Tests pass their own to step through backoff without waiting it out.
	Now func() time.Time
}

// Deliverer is the outbound loop.
type Deliverer struct {
	o      Options
	wake   chan struct{}
	typing chan typingHint
}

type typingHint struct {
	t  store.Turn
	on bool
}

// Payload is the body of a /send call.
type Payload = adapter.Delivery

// New returns a Deliverer; call Run to start it.
func New(o Options) *Deliverer {
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 30 * time.Second}
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.BaseDelay <= 0 {
		o.BaseDelay = DefaultBaseDelay
	}
	if o.MaxDelay <= 0 {
		o.MaxDelay = DefaultMaxDelay
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Deliverer{o: o, wake: make(chan struct{}, 1), typing: make(chan typingHint, 64)}
}

// Wake asks the loop to look for due messages now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// TurnTyping queues the typing hint for turn t's chat; hints go out in
// order on their own goroutine, and a full queue drops one rather than
// hold up a turn.
func (d *Deliverer) TurnTyping(t store.Turn, on bool) {
	select {
	case d.typing <- typingHint{t, on}:
	default:
	}
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	hints := make(chan struct{})
	defer func() { <-hints }()
	go func() {
		defer close(hints)
		for {
			select {
			case <-ctx.Done():
				return
			case h := <-d.typing:
				msgs, err := d.o.Store.TurnMessages(ctx, h.t)
				if err == nil && len(msgs) > 0 {
					d.Typing(ctx, msgs[len(msgs)-1].ChatJID, h.t.Folder, h.on)
				}
			}
		}
	}()
	for {
		if _, err := d.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			d.o.Log.Error("delivery pass", "err", err)
		}
		wait := d.o.Poll
		if next, err := d.o.Store.NextOutboundAt(ctx); err == nil && next > 0 {
			if w := time.UnixMilli(next).Sub(d.o.Now()); w < wait {
				wait = max(w, 10*time.Millisecond)
			}
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-d.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// DeliverDue makes one attempt at every due message and returns how many the
// adapters accepted.
func (d *Deliverer) DeliverDue(ctx context.Context) (int, error) {
	due, err := d.o.Store.DueOutbound(ctx, d.o.Now().UnixMilli(), 100)
	if err != nil {
		return 0, err
	}
	sent := 0
	for _, m := range due {
		if ctx.Err() != nil {
			return sent, ctx.Err()
		}
		err := d.post(ctx, m)
		if err == nil {
			if err := d.o.Store.MarkSent(ctx, m.ID); err != nil {
				return sent, err
			}
			sent++
			d.o.Log.Debug("delivered", "id", m.ID, "chat", m.ChatJID, "platform", m.Platform)
			continue
		}
		attempt := m.Attempts + 1
		var ae *answerError
		gone := errors.As(err, &ae) && ae.status == http.StatusGone
		failed := attempt >= d.o.MaxAttempts || gone
		gap := d.Gap(attempt)
		if errors.As(err, &ae) && ae.retryAfter > gap {
			gap = ae.retryAfter
		}
		next := d.o.Now().Add(gap).UnixMilli()
		if failed {
			d.o.Log.Warn("delivery failed for good", "id", m.ID, "chat", m.ChatJID, "attempts", attempt, "err", err)
		} else {
			d.o.Log.Info("delivery retry", "id", m.ID, "chat", m.ChatJID, "attempt", attempt, "err", err)
		}
		if err := d.o.Store.MarkAttempt(ctx, m.ID, next, failed); err != nil {
			return sent, err
		}
	}
	return sent, nil
}

// Gap is the wait after the given failed attempt: BaseDelay doubling, capped.
func (d *Deliverer) Gap(attempt int) time.Duration {
	g := d.o.BaseDelay
	for i := 1; i < attempt && g < d.o.MaxDelay; i++ {
		g *= 2
	}
	return min(g, d.o.MaxDelay)
}

// answerError is an adapter's non-2xx answer.
type answerError struct {
	url        string
	status     int
	retryAfter time.Duration
}

func (e *answerError) Error() string {
	return fmt.Sprintf("adapter %s answered %d %s", e.url, e.status, http.StatusText(e.status))
}

func (d *Deliverer) post(ctx context.Context, m store.Outbound) error {
	a, err := d.o.Store.GetAdapter(ctx, m.Platform)
	if err != nil {
		return fmt.Errorf("no adapter for platform %q: %w", m.Platform, err)
	}
	path, body := adapter.PathSend, any(adapter.Delivery{ID: m.ID, Key: adapter.KeyOf(m.ID), ChatJID: m.ChatJID, Text: m.Text,
		ReplyTo: m.ReplyTo, Folder: m.Folder, Topic: m.Topic})
	if m.EditOf > 0 {
		path, body = adapter.PathEdit, adapter.Edit{ID: m.ID, Key: adapter.KeyOf(m.ID), EditOf: adapter.KeyOf(m.EditOf), ChatJID: m.ChatJID, Text: m.Text}
	}
	return d.call(ctx, a, path, adapter.KeyOf(m.ID), body)
}

// call POSTs body signed to the adapter's path.
func (d *Deliverer) call(ctx context.Context, a store.Adapter, path, key string, v any) error {
	body, _ := json.Marshal(v)
	url := strings.TrimRight(a.CallbackURL, "/") + path
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(adapter.HeaderIdempotency, key)
	}
	if a.Secret != "" {
		adapter.Sign(req.Header, a.Secret, time.Now(), body)
	}
	resp, err := d.o.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		ae := &answerError{url: url, status: resp.StatusCode}
		if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
			ae.retryAfter = min(time.Duration(s)*time.Second, d.o.MaxDelay)
		}
		return ae
	}
	return nil
}

// Typing tells the adapter of chat's platform that a turn for it started
// (on) or ended. It is a hint: one try, a short timeout, failures logged.
func (d *Deliverer) Typing(ctx context.Context, chat, folder string, on bool) {
	c, err := d.o.Store.GetChat(ctx, chat)
	if err != nil || c.Platform == "" {
		return
	}
	a, err := d.o.Store.GetAdapter(ctx, c.Platform)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := d.call(ctx, a, adapter.PathTyping, "", adapter.Typing{ChatJID: chat, Folder: folder, Typing: on}); err != nil {
		d.o.Log.Debug("typing not shown", "chat", chat, "platform", c.Platform, "err", err)
	}
}

// ValidCallback checks an adapter callback URL: absolute http or https with a host.
func ValidCallback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("callback %q: want an absolute http(s) URL like http://127.0.0.1:9000: %w", raw, ErrBadCallback)
	}
	return nil
}
