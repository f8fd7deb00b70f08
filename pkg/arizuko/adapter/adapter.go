// Package adapter is the contract between arizuko and a channel adapter: the
// process that carries a platform's messages in (POST /v1/messages) and the
// daemon's messages out (POSTs to the adapter's callback URL). It holds the
// wire types, the request signature both sides use, a Handler that makes a Go
// adapter conform, and Check, the conformance kit behind `arizuko adapter
// test`.
package adapter

import (
	"errors"
	"strconv"
)

// Paths under an adapter's callback URL.
const (
	PathSend   = "/send"
	PathEdit   = "/edit"
	PathTyping = "/typing"
)

// Headers of a call from the daemon to an adapter.
const (
	HeaderSignature   = "X-Arizuko-Signature"
	HeaderTimestamp   = "X-Arizuko-Timestamp"
	HeaderIdempotency = "Idempotency-Key"
)

// Attachment is a file that travels by reference: the adapter fetches or
// posts the URL, never the bytes through arizuko.
type Attachment struct {
	Name        string `json:"name"`
	ContentType string `json:"content_type,omitempty"`
	Size        int64  `json:"size,omitempty"`
	URL         string `json:"url"`
}

// Delivery is the body of POST <callback>/send: one message to put on the
// platform. Key is stable across retries; an adapter that has already sent a
// message with Key answers with that message's platform id and sends nothing.
type Delivery struct {
	ID          int64        `json:"id"`
	Key         string       `json:"idempotency_key"`
	ChatJID     string       `json:"chat_jid"`
	Text        string       `json:"text"`
	ReplyTo     string       `json:"reply_to,omitempty"`
	Folder      string       `json:"folder,omitempty"`
	Topic       string       `json:"topic,omitempty"`
	Attachments []Attachment `json:"attachments,omitempty"`
}

// Edit is the body of POST <callback>/edit: replace the text of the message
// the daemon sent earlier under the key EditOf.
type Edit struct {
	ID      int64  `json:"id"`
	Key     string `json:"idempotency_key"`
	EditOf  string `json:"edit_of"`
	ChatJID string `json:"chat_jid"`
	Text    string `json:"text"`
}

// Typing is the body of POST <callback>/typing: a turn for the chat started
// (true) or ended (false). It is a hint, sent once and never retried.
type Typing struct {
	ChatJID string `json:"chat_jid"`
	Folder  string `json:"folder,omitempty"`
	Typing  bool   `json:"typing"`
}

// Answer is an adapter's 2xx body for /send and /edit: the platform's id of
// the message, the same for every retry of one key.
type Answer struct {
	PlatformID string `json:"platform_id"`
}

// KeyOf is the idempotency key of the daemon's outbound message id.
func KeyOf(id int64) string { return "arizuko-out-" + strconv.FormatInt(id, 10) }

// Errors a Handler's callbacks return to shape the answer the daemon sees.
var (
	// ErrUnknownChat: the adapter does not carry this chat (404, retried).
	ErrUnknownChat = errors.New("unknown chat")
	// ErrGone: the chat or message no longer exists; 410 tells the daemon to
	// give up at once.
	ErrGone = errors.New("gone")
)

// RateLimited is a platform's "slow down": the daemon is told 429 with
// Retry-After and tries again no sooner.
type RateLimited struct{ RetryAfterSeconds int }

func (e *RateLimited) Error() string {
	return "rate limited, retry after " + strconv.Itoa(e.RetryAfterSeconds) + "s"
}
