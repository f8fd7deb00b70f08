package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// MaxBody bounds one call's body.
const MaxBody = 1 << 20

// remembered is how many idempotency keys a Handler keeps: far more than the
// daemon retries in flight.
const remembered = 10000

// Handler serves an adapter's side of the contract: it verifies every call's
// signature, answers a repeated idempotency key with the first answer
// without calling Send again, and maps errors to the statuses the daemon acts
// on. The callbacks do the platform's part.
type Handler struct {
	Secret string
	// Send puts d on the platform and returns its platform id.
	Send func(ctx context.Context, d Delivery) (string, error)
	// Edit replaces the text of the message sent as platformID; nil answers
	// every edit 501.
	Edit func(ctx context.Context, e Edit, platformID string) error
	// Typing shows or clears a typing indicator; nil accepts and ignores it.
	Typing func(ctx context.Context, t Typing) error
	Log    *slog.Logger // nil discards
	Now    func() time.Time

	mu    sync.Mutex
	sent  map[string]string // idempotency key → platform id
	order []string
}

// ServeHTTP serves /send, /edit and /typing relative to where it is mounted
// (it matches on the path's last element).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		fail(w, http.StatusMethodNotAllowed, "only POST")
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		fail(w, http.StatusRequestEntityTooLarge, "body too large")
		return
	}
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	if err := Verify(r.Header, h.Secret, now(), body); err != nil {
		h.log().Warn("adapter call refused", "path", r.URL.Path, "remote", r.RemoteAddr, "err", err)
		fail(w, http.StatusUnauthorized, err.Error())
		return
	}
	switch last(r.URL.Path) {
	case PathSend:
		var d Delivery
		if err := decode(body, &d); err != nil || d.Key == "" || d.ChatJID == "" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("send: want a JSON Delivery with idempotency_key and chat_jid (%v)", err))
			return
		}
		h.once(w, r.Context(), d.Key, func(ctx context.Context) (string, error) { return h.Send(ctx, d) })
	case PathEdit:
		var e Edit
		if err := decode(body, &e); err != nil || e.Key == "" || e.EditOf == "" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("edit: want a JSON Edit with idempotency_key and edit_of (%v)", err))
			return
		}
		if h.Edit == nil {
			fail(w, http.StatusNotImplemented, "this adapter cannot edit messages")
			return
		}
		h.once(w, r.Context(), e.Key, func(ctx context.Context) (string, error) {
			pid, ok := h.lookup(e.EditOf)
			if !ok {
				return "", fmt.Errorf("edit of %q: this adapter never sent it: %w", e.EditOf, ErrGone)
			}
			return pid, h.Edit(ctx, e, pid)
		})
	case PathTyping:
		var t Typing
		if err := decode(body, &t); err != nil || t.ChatJID == "" {
			fail(w, http.StatusBadRequest, fmt.Sprintf("typing: want a JSON Typing with chat_jid (%v)", err))
			return
		}
		if h.Typing != nil {
			if err := h.Typing(r.Context(), t); err != nil {
				h.answerErr(w, err)
				return
			}
		}
		w.WriteHeader(http.StatusNoContent)
	default:
		fail(w, http.StatusNotFound, "no such adapter endpoint: "+r.URL.Path)
	}
}

// once runs fn for a key not seen before and remembers its platform id; a
// key seen before gets the remembered answer. The lock is held across fn so
// two retries racing each other still send once.
func (h *Handler) once(w http.ResponseWriter, ctx context.Context, key string, fn func(context.Context) (string, error)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if pid, ok := h.sent[key]; ok {
		writeJSON(w, http.StatusOK, Answer{PlatformID: pid})
		return
	}
	pid, err := fn(ctx)
	if err != nil {
		h.answerErr(w, err)
		return
	}
	if h.sent == nil {
		h.sent = map[string]string{}
	}
	h.sent[key] = pid
	h.order = append(h.order, key)
	if len(h.order) > remembered {
		delete(h.sent, h.order[0])
		h.order = h.order[1:]
	}
	writeJSON(w, http.StatusOK, Answer{PlatformID: pid})
}

func (h *Handler) lookup(key string) (string, bool) {
	pid, ok := h.sent[key] // the caller holds mu
	return pid, ok
}

func (h *Handler) answerErr(w http.ResponseWriter, err error) {
	var rl *RateLimited
	switch {
	case errors.As(err, &rl):
		w.Header().Set("Retry-After", strconv.Itoa(max(rl.RetryAfterSeconds, 1)))
		fail(w, http.StatusTooManyRequests, err.Error())
	case errors.Is(err, ErrGone):
		fail(w, http.StatusGone, err.Error())
	case errors.Is(err, ErrUnknownChat):
		fail(w, http.StatusNotFound, err.Error())
	default:
		h.log().Error("adapter call failed", "err", err)
		fail(w, http.StatusBadGateway, err.Error())
	}
}

func (h *Handler) log() *slog.Logger {
	if h.Log != nil {
		return h.Log
	}
	return slog.New(slog.DiscardHandler)
}

func last(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '/' {
			return p[i:]
		}
	}
	return "/" + p
}

func decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("malformed JSON: %w", err)
	}
	return nil
}

// ErrorBody is the JSON of a non-2xx answer.
type ErrorBody struct {
	Error string `json:"error"`
}

func fail(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, ErrorBody{Error: msg})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
