package adapter

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Inbox stands in for the daemon's POST /v1/messages when the kit checks
// an adapter's inbound side: point the adapter at it, and Trigger makes the
// platform deliver a message.
type Inbox struct {
	// Trigger makes the platform deliver one message with text, twice, as a
	// platform redelivers one it thinks was lost.
	Trigger func(ctx context.Context, text string) error

	mu    sync.Mutex
	posts []inboxPost
}

type inboxPost struct {
	auth, key string
	body      map[string]any
}

// ServeHTTP takes an inbound POST and answers as the daemon does: 201 the
// first time a key is seen, 200 after.
func (b *Inbox) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	raw, _ := io.ReadAll(io.LimitReader(r.Body, MaxBody))
	var body map[string]any
	if json.Unmarshal(raw, &body) != nil {
		fail(w, http.StatusBadRequest, "malformed JSON")
		return
	}
	key := r.Header.Get(HeaderIdempotency)
	if key == "" {
		key, _ = body["platform_id"].(string)
	}
	b.mu.Lock()
	seen := false
	for _, p := range b.posts {
		seen = seen || (key != "" && p.key == key)
	}
	b.posts = append(b.posts, inboxPost{auth: r.Header.Get("Authorization"), key: key, body: body})
	b.mu.Unlock()
	status := http.StatusCreated
	if seen {
		status = http.StatusOK
	}
	writeJSON(w, status, map[string]any{"duplicate": seen})
}

// with returns the posts whose text holds s.
func (b *Inbox) with(s string) []inboxPost {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []inboxPost
	for _, p := range b.posts {
		if t, _ := p.body["text"].(string); strings.Contains(t, s) {
			out = append(out, p)
		}
	}
	return out
}

// inboundCase is the kit's check of the adapter's inbound side.
func (k *kit) inboundCase(ctx context.Context) (bool, string) {
	b := k.c.Inbox
	text := "arizuko conformance inbound " + k.run
	if err := b.Trigger(ctx, text); err != nil {
		return false, "trigger: " + err.Error()
	}
	var got []inboxPost
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if got = b.with(text); len(got) > 0 {
			break
		}
	}
	if len(got) == 0 {
		return false, "the adapter posted nothing to /v1/messages"
	}
	for _, p := range got {
		chat, _ := p.body["chat_jid"].(string)
		switch {
		case !strings.HasPrefix(p.auth, "Bearer ") || len(p.auth) == len("Bearer "):
			return false, "a post without a bearer token"
		case p.key == "":
			return false, "a post without Idempotency-Key or platform_id: a redelivery would be a second message"
		case p.key != got[0].key:
			return false, fmt.Sprintf("one message posted under keys %q and %q", got[0].key, p.key)
		case !strings.Contains(chat, ":"):
			return false, fmt.Sprintf("chat_jid %q is not <platform>:<id>", chat)
		}
	}
	return true, fmt.Sprintf("%d post(s), one key %q", len(got), got[0].key)
}
