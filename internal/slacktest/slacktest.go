// Package slacktest is a loopback stand-in for the part of Slack the Slack
// adapter talks to: the Web API methods it calls, and Slack's request
// signature for the events it is sent.
package slacktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Server speaks the subset of Slack's Web API the adapter uses, as
// documented: auth.test, chat.postMessage and chat.update, form-encoded
// with a bearer token, answering {"ok": …}; a 429 carries Retry-After.
type Server struct {
	Token string
	srv   *httptest.Server

	mu       sync.Mutex
	posts    []Post
	updates  []Post
	attempts []time.Time // every chat.postMessage call, refused ones too
	limit    int         // answer this many chat.postMessage calls 429 first
	n        int
}

// Post is one chat.postMessage or chat.update Slack took.
type Post struct{ Channel, Text, ThreadTS, TS string }

// New starts the server on loopback; its bot is user UBOT with Token.
func New(t testing.TB) *Server {
	f := &Server{Token: "xoxb-test-token"}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// Limit makes the next n chat.postMessage calls answer 429 Retry-After: 1.
func (f *Server) Limit(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.limit = n
}

// URL is the API base for slack.OptionAPIURL.
func (f *Server) URL() string { return f.srv.URL + "/api/" }

func answer(w http.ResponseWriter, v map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (f *Server) serve(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	// Slack takes the token as a bearer header or a "token" argument.
	if r.Header.Get("Authorization") != "Bearer "+f.Token && r.PostForm.Get("token") != f.Token {
		answer(w, map[string]any{"ok": false, "error": "invalid_auth"})
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := r.PostForm.Get("channel")
	switch r.URL.Path {
	case "/api/auth.test":
		answer(w, map[string]any{"ok": true, "user_id": "UBOT", "user": "arizuko", "team_id": "T1"})
	case "/api/chat.postMessage":
		f.attempts = append(f.attempts, time.Now())
		if f.limit > 0 {
			f.limit--
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		if ch == "CGONE" {
			answer(w, map[string]any{"ok": false, "error": "channel_not_found"})
			return
		}
		f.n++
		p := Post{Channel: ch, Text: r.PostForm.Get("text"), ThreadTS: r.PostForm.Get("thread_ts"), TS: fmt.Sprintf("1800000000.%06d", f.n)}
		f.posts = append(f.posts, p)
		answer(w, map[string]any{"ok": true, "channel": ch, "ts": p.TS, "message": map[string]any{"text": p.Text, "ts": p.TS}})
	case "/api/chat.update":
		p := Post{Channel: ch, Text: r.PostForm.Get("text"), TS: r.PostForm.Get("ts")}
		f.updates = append(f.updates, p)
		answer(w, map[string]any{"ok": true, "channel": ch, "ts": p.TS, "text": p.Text})
	default:
		answer(w, map[string]any{"ok": false, "error": "unknown_method"})
	}
}

// Sent is what Slack took: posts, updates, and the time of every
// chat.postMessage call, refused ones included.
func (f *Server) Sent() ([]Post, []Post, []time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Post(nil), f.posts...), append([]Post(nil), f.updates...), append([]time.Time(nil), f.attempts...)
}

// Sign is Slack's request signature, written from its documentation rather
// than taken from the library the adapter uses: v0= and the hex HMAC-SHA256
// of "v0:<timestamp>:<body>" under the signing secret.
func Sign(secret string, ts int64, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	fmt.Fprintf(m, "v0:%d:", ts)
	m.Write(body)
	return "v0=" + hex.EncodeToString(m.Sum(nil))
}
