// Package hook is arizuko's webhook ingress: a POST to /hook/<token> becomes
// a message in the hook's folder chat, with the body as its text. The token
// is the only credential and names the folder; a signed hook also needs a
// GitHub-style X-Hub-Signature-256 (HMAC-SHA256 of the body) and accepts a
// signed body once, so a captured delivery cannot be replayed; every hook
// has its own rate limit.
package hook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// MaxBody bounds a delivery: the body becomes one message's text.
const MaxBody = 64 << 10

// SignatureHeader carries "sha256=<hex HMAC-SHA256 of the body>", as GitHub sends it.
const SignatureHeader = "X-Hub-Signature-256"

// deliveryHeaders name a delivery; an unsigned hook accepts each id once.
var deliveryHeaders = []string{"X-GitHub-Delivery", "X-Hook-Delivery"}

// Handler serves POST /hook/{token}.
type Handler struct {
	l    *service.Local
	log  *slog.Logger // the service's: refused deliveries, failed lookups
	post func(context.Context, service.MessageIn) (service.Ingest, error)

	mu     sync.Mutex
	limits map[int64]*rate.Limiter
}

// New returns the handler; post stores the message (the daemon's
// PostMessage, which also wakes the turn queue).
func New(l *service.Local, post func(context.Context, service.MessageIn) (service.Ingest, error)) *Handler {
	return &Handler{l: l, log: l.Log(), post: post, limits: map[int64]*rate.Limiter{}}
}

// Register mounts the handler on s; it checks its own token.
func (h *Handler) Register(s *api.Server) { s.Mount("POST", "/hook/{token}", h) }

// Accepted is the answer to a delivery.
type Accepted struct {
	MessageID int64  `json:"message_id"`
	Folder    string `json:"folder"`
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	api.WriteJSON(w, status, service.Error{Code: code, Message: msg})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	hk, secret, err := h.l.HookByToken(ctx, r.PathValue("token"))
	if errors.Is(err, service.ErrNoHook) {
		// The same answer for a guess and a revoked token.
		fail(w, http.StatusNotFound, service.CodeNotFound, "no such webhook: the token is wrong or was revoked")
		return
	}
	if err != nil {
		h.log.ErrorContext(ctx, "hook lookup", "err", err)
		fail(w, http.StatusInternalServerError, service.CodeInternal, "webhook lookup failed")
		return
	}
	if !h.limiter(hk).Allow() {
		w.Header().Set("Retry-After", strconv.Itoa(max(1, 60/hk.PerMinute)))
		fail(w, http.StatusTooManyRequests, service.CodeLimit, fmt.Sprintf("webhook %d takes %d deliveries a minute; retry later", hk.ID, hk.PerMinute))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		fail(w, http.StatusRequestEntityTooLarge, service.CodeInvalid, fmt.Sprintf("body is larger than %d bytes", MaxBody))
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, service.CodeInvalid, "reading the body: "+err.Error())
		return
	}
	if len(body) == 0 {
		fail(w, http.StatusBadRequest, service.CodeInvalid, "body is empty: the body is the message's text")
		return
	}
	key := ""
	if secret != nil {
		if err := verify(secret, body, r.Header.Get(SignatureHeader)); err != nil {
			h.refuse(ctx, hk, err.Error())
			fail(w, http.StatusUnauthorized, service.CodeDenied, err.Error())
			return
		}
		// The signature covers the body alone, so the body is what names
		// the delivery: a delivery id header could be changed at will.
		sum := sha256.Sum256(body)
		key = "sha256:" + hex.EncodeToString(sum[:])
	} else if key, err = deliveryID(r.Header); err != nil {
		fail(w, http.StatusBadRequest, service.CodeInvalid, err.Error())
		return
	}
	text, err := textOf(r.Header.Get("Content-Type"), body)
	if err != nil {
		fail(w, http.StatusUnsupportedMediaType, service.CodeInvalid, err.Error())
		return
	}
	actx, err := h.l.ActFor(ctx, hk.Owner, "message:post", hk.Folder)
	if err != nil {
		fail(w, http.StatusForbidden, service.CodeDenied, fmt.Sprintf("webhook %d: its owner %s may no longer post into %s", hk.ID, hk.Owner, hk.Folder))
		return
	}
	if key != "" {
		key = service.HookPrincipal(hk.ID) + ":" + key
	}
	ing, err := h.post(actx, service.MessageIn{ChatJID: router.DirectPrefix + hk.Folder, Sender: service.HookPrincipal(hk.ID), Text: text, PlatformID: key})
	switch {
	case err != nil:
		status := map[string]int{service.CodeInvalid: 400, service.CodeDenied: 403, service.CodeNotFound: 404, service.CodeLimit: 429}[service.Code(err)]
		if status == 0 {
			h.log.ErrorContext(ctx, "hook post", "hook", hk.ID, "err", err)
			status = http.StatusInternalServerError
		}
		fail(w, status, service.Code(err), err.Error())
	case ing.Duplicate:
		h.refuse(ctx, hk, "replayed delivery "+key)
		fail(w, http.StatusConflict, service.CodeConflict, "this delivery was already accepted (message "+strconv.FormatInt(ing.Message.ID, 10)+"); a replay is not posted again")
	default:
		api.WriteJSON(w, http.StatusAccepted, Accepted{MessageID: ing.Message.ID, Folder: hk.Folder})
	}
}

// limiter is the hook's token bucket: per_minute a minute, as a burst too.
func (h *Handler) limiter(hk store.Hook) *rate.Limiter {
	h.mu.Lock()
	defer h.mu.Unlock()
	l, ok := h.limits[hk.ID]
	if !ok || l.Burst() != hk.PerMinute {
		l = rate.NewLimiter(rate.Every(time.Minute/time.Duration(hk.PerMinute)), hk.PerMinute)
		h.limits[hk.ID] = l
	}
	return l
}

// refuse audits a refused delivery, so a forger shows in `arizuko audit`.
func (h *Handler) refuse(ctx context.Context, hk store.Hook, why string) {
	d := acl.Decision{Principal: service.HookPrincipal(hk.ID), Action: "message:post", Scope: hk.Folder, Reason: why}
	if err := h.l.Store().Audit(ctx, d); err != nil {
		h.log.ErrorContext(ctx, "hook audit", "err", err)
	}
	h.log.InfoContext(ctx, "hook delivery refused", "hook", hk.ID, "reason", why)
}

// verify checks a "sha256=<hex>" signature of body in constant time.
func verify(secret, body []byte, header string) error {
	hexSig, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return fmt.Errorf("missing or malformed %s header: this hook is signed; send sha256=<hex HMAC-SHA256 of the body>", SignatureHeader)
	}
	got, err := hex.DecodeString(hexSig)
	if err != nil {
		return fmt.Errorf("%s is not hex", SignatureHeader)
	}
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	if !hmac.Equal(got, m.Sum(nil)) {
		return fmt.Errorf("%s does not match the body: wrong secret, or the body was changed", SignatureHeader)
	}
	return nil
}

// deliveryID is the id an unsigned delivery names itself by, "" for none.
func deliveryID(hdr http.Header) (string, error) {
	for _, n := range deliveryHeaders {
		v := hdr.Get(n)
		if v == "" {
			continue
		}
		if len(v) > 128 || strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r > '~' }) {
			return "", fmt.Errorf("%s %q: want up to 128 printable ASCII characters", n, v)
		}
		return "id:" + v, nil
	}
	return "", nil
}

// textOf turns a JSON, form or plain-text body into the message's text.
func textOf(contentType string, body []byte) (string, error) {
	mt, _, err := mime.ParseMediaType(contentType)
	if contentType == "" {
		mt, err = "text/plain", nil
	}
	if err != nil {
		return "", fmt.Errorf("Content-Type %q: %v", contentType, err)
	}
	if !utf8.Valid(body) {
		return "", fmt.Errorf("body is not UTF-8: send text, JSON or a form as UTF-8")
	}
	switch {
	case mt == "application/json" || strings.HasSuffix(mt, "+json"):
		if !json.Valid(body) {
			return "", fmt.Errorf("body is not valid JSON though Content-Type says %s", mt)
		}
		return string(body), nil
	case mt == "application/x-www-form-urlencoded":
		q, err := url.ParseQuery(string(body))
		if err != nil {
			return "", fmt.Errorf("form body: %v", err)
		}
		// GitHub's form deliveries carry the JSON in one payload field.
		if p, ok := q["payload"]; ok && len(q) == 1 && len(p) == 1 {
			return p[0], nil
		}
		keys := make([]string, 0, len(q))
		for k := range q {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var b strings.Builder
		for _, k := range keys {
			for _, v := range q[k] {
				fmt.Fprintf(&b, "%s: %s\n", k, v)
			}
		}
		return b.String(), nil
	case mt == "text/plain":
		return string(body), nil
	}
	return "", fmt.Errorf("Content-Type %q: send application/json, application/x-www-form-urlencoded or text/plain", contentType)
}
