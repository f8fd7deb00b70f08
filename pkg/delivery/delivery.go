// Package delivery moves outbound messages to their adapters: each is stored
// pending first, POSTed to <adapter>/send, retried with growing gaps and
// marked failed after a bound. The state lives in the store, so a restarted
// daemon picks up where the last one stopped.
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
	"strings"
	"time"

	"github.com/crackbox/crackbox/pkg/store"
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
	Log         *slog.Logger
}

// Deliverer is the outbound loop.
type Deliverer struct {
	o    Options
	wake chan struct{}
}

// Payload is the JSON body POSTed to <adapter>/send. ID is stable across
// retries so an adapter can drop a repeat.
type Payload struct {
	ID      int64  `json:"id"`
	ChatJID string `json:"chat_jid"`
	Text    string `json:"text"`
	ReplyTo string `json:"reply_to,omitempty"`
	Folder  string `json:"folder,omitempty"`
	Topic   string `json:"topic,omitempty"`
}

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
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &Deliverer{o: o, wake: make(chan struct{}, 1)}
}

// Wake asks the loop to look for due messages now.
func (d *Deliverer) Wake() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Run delivers until ctx ends.
func (d *Deliverer) Run(ctx context.Context) {
	for {
		if _, err := d.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			d.o.Log.Error("delivery pass", "err", err)
		}
		wait := d.o.Poll
		if next, err := d.o.Store.NextOutboundAt(ctx); err == nil && next > 0 {
			if w := time.Until(time.UnixMilli(next)); w < wait {
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
	due, err := d.o.Store.DueOutbound(ctx, time.Now().UnixMilli(), 100)
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
		failed := attempt >= d.o.MaxAttempts
		next := time.Now().Add(d.Gap(attempt)).UnixMilli()
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

func (d *Deliverer) post(ctx context.Context, m store.Outbound) error {
	a, err := d.o.Store.GetAdapter(ctx, m.Platform)
	if err != nil {
		return fmt.Errorf("no adapter for platform %q: %w", m.Platform, err)
	}
	body, _ := json.Marshal(Payload{ID: m.ID, ChatJID: m.ChatJID, Text: m.Text, ReplyTo: m.ReplyTo, Folder: m.Folder, Topic: m.Topic})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(a.CallbackURL, "/")+"/send", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := d.o.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("adapter %s answered %s", a.CallbackURL, resp.Status)
	}
	return nil
}

// ValidCallback checks an adapter callback URL: absolute http or https with a host.
func ValidCallback(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("callback %q: want an absolute http(s) URL like http://127.0.0.1:9000: %w", raw, ErrBadCallback)
	}
	return nil
}
