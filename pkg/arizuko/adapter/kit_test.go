package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// platform is an in-memory chat platform: what the adapters under test post to.
type platform struct {
	mu   sync.Mutex
	msgs map[string]string // platform id → text
	n    int
}

func (p *platform) post(text string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
	if p.msgs == nil {
		p.msgs = map[string]string{}
	}
	id := fmt.Sprintf("m%d", p.n)
	p.msgs[id] = text
	return id
}

// conforming is an adapter built on Handler.
func conforming(p *platform, secret string) http.Handler {
	return &Handler{Secret: secret,
		Send: func(_ context.Context, d Delivery) (string, error) { return p.post(d.Text), nil },
		Edit: func(_ context.Context, e Edit, pid string) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.msgs[pid] = e.Text
			return nil
		},
	}
}

// flawed is a hand-written adapter with one flaw switched on.
type flawed struct {
	p                                *platform
	secret                           string
	noSig, noWindow, noDedupe, fixed bool
	mu                               sync.Mutex
	seen                             map[string]string
}

func (f *flawed) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	now := time.Now()
	if f.noWindow {
		// Checks the MAC but believes any timestamp.
		now = time.Unix(0, 0)
		if ts := r.Header.Get(HeaderTimestamp); ts != "" {
			var t int64
			fmt.Sscan(ts, &t)
			now = time.Unix(t, 0)
		}
	}
	if !f.noSig {
		if err := Verify(r.Header, f.secret, now, body); err != nil {
			fail(w, http.StatusUnauthorized, err.Error())
			return
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[string]string{}
	}
	switch {
	case strings.HasSuffix(r.URL.Path, PathTyping):
		w.WriteHeader(http.StatusNoContent)
	case strings.HasSuffix(r.URL.Path, PathEdit):
		var e Edit
		if json.Unmarshal(body, &e) != nil {
			fail(w, http.StatusBadRequest, "bad")
			return
		}
		pid, ok := f.seen[e.EditOf]
		if !ok {
			fail(w, http.StatusGone, "unknown")
			return
		}
		writeJSON(w, http.StatusOK, Answer{PlatformID: pid})
	default:
		var d Delivery
		if json.Unmarshal(body, &d) != nil {
			fail(w, http.StatusBadRequest, "bad")
			return
		}
		if pid, ok := f.seen[d.Key]; ok && !f.noDedupe {
			writeJSON(w, http.StatusOK, Answer{PlatformID: pid})
			return
		}
		pid := f.p.post(d.Text)
		if f.fixed {
			pid = "always-the-same"
		}
		f.seen[d.Key] = pid
		writeJSON(w, http.StatusOK, Answer{PlatformID: pid})
	}
}

func failed(rs []Result) []string {
	var out []string
	for _, r := range rs {
		if !r.Pass {
			out = append(out, r.Case)
		}
	}
	return out
}

// The kit passes a conforming adapter and fails each flawed one on the cases
// its flaw breaks, and on no other.
func TestKitCatchesBrokenAdapters(t *testing.T) {
	const secret = "test-signing-secret"
	for _, tc := range []struct {
		name string
		h    func(*platform) http.Handler
		want []string
	}{
		{"conforming", func(p *platform) http.Handler { return conforming(p, secret) }, nil},
		{"ignores signatures", func(p *platform) http.Handler { return &flawed{p: p, secret: secret, noSig: true} }, []string{
			"signature: unsigned call refused", "signature: wrong secret refused", "signature: tampered body refused",
			"signature: stale timestamp refused", "signature: unsigned typing refused"}},
		{"no replay window", func(p *platform) http.Handler { return &flawed{p: p, secret: secret, noWindow: true} },
			[]string{"signature: stale timestamp refused"}},
		{"does not dedupe", func(p *platform) http.Handler { return &flawed{p: p, secret: secret, noDedupe: true} },
			// The retry overwrote the key's platform id, so the edit hits the copy.
			[]string{"send: retry of a key is not sent twice", "edit: a sent message is edited"}},
		{"fakes one platform id", func(p *platform) http.Handler { return &flawed{p: p, secret: secret, fixed: true} },
			[]string{"send: a new key is a new message"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &platform{}
			srv := httptest.NewServer(tc.h(p))
			defer srv.Close()
			rs, err := Check(context.Background(), KitConfig{URL: srv.URL, Secret: secret, Chat: "test:chat"})
			if err != nil {
				t.Fatal(err)
			}
			var table bytes.Buffer
			PrintTable(&table, rs)
			got := failed(rs)
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("failed cases %q, want %q\n%s", got, tc.want, table.String())
			}
			if Passed(rs) != (tc.want == nil) {
				t.Fatalf("Passed = %v\n%s", Passed(rs), table.String())
			}
			if tc.want == nil {
				t.Logf("\n%s", table.String())
				// Two keys sent (first, second, attachment): three messages, the retry none.
				if p.n != 3 {
					t.Fatalf("the platform got %d messages, want 3", p.n)
				}
			}
		})
	}
}

// Verify refuses every way a signature can be wrong, each with its reason.
func TestVerify(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	body := []byte(`{"x":1}`)
	good := http.Header{}
	Sign(good, "s", now, body)
	for _, tc := range []struct {
		name   string
		h      http.Header
		secret string
		body   []byte
		at     time.Time
		want   string
	}{
		{"good", good, "s", body, now, ""},
		{"good at the window's edge", good, "s", body, now.Add(Window), ""},
		{"past the window", good, "s", body, now.Add(Window + time.Second), "window"},
		{"from the future", good, "s", body, now.Add(-Window - time.Second), "window"},
		{"other secret", good, "t", body, now, "does not match"},
		{"other body", good, "s", []byte(`{"x":2}`), now, "does not match"},
		{"no headers", http.Header{}, "s", body, now, "required"},
		{"no secret configured", good, "", body, now, "no secret"},
		{"timestamp not a number", http.Header{HeaderTimestamp: {"soon"}, HeaderSignature: {"v1=00"}}, "s", body, now, "unix seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Verify(tc.h, tc.secret, tc.at, tc.body)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error about %q", err, tc.want)
			}
		})
	}
}

// inboundAdapter is a platform bridge that posts each platform message to
// the daemon; keyed says how it keys the post.
func inboundCheck(t *testing.T, keyed func(platformID string, n int) string) []Result {
	t.Helper()
	inbox := &Inbox{}
	daemon := httptest.NewServer(inbox)
	defer daemon.Close()
	n := 0
	inbox.Trigger = func(ctx context.Context, text string) error {
		for range 2 { // the platform delivers the message twice
			n++
			body, _ := json.Marshal(map[string]string{"chat_jid": "test:chat", "text": text})
			req, _ := http.NewRequestWithContext(ctx, "POST", daemon.URL+"/v1/messages", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer azk_test")
			if k := keyed("msg-77", n); k != "" {
				req.Header.Set(HeaderIdempotency, k)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			resp.Body.Close()
		}
		return nil
	}
	p := &platform{}
	srv := httptest.NewServer(conforming(p, "s"))
	defer srv.Close()
	rs, err := Check(context.Background(), KitConfig{URL: srv.URL, Secret: "s", Chat: "test:chat", Inbox: inbox})
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// The inbound case passes an adapter that keys a message by the platform's
// id and fails one that sends no key or a fresh key per delivery.
func TestKitInbound(t *testing.T) {
	for _, tc := range []struct {
		name  string
		keyed func(string, int) string
		pass  bool
	}{
		{"keyed by platform id", func(id string, _ int) string { return id }, true},
		{"no key", func(string, int) string { return "" }, false},
		{"a fresh key per delivery", func(id string, n int) string { return fmt.Sprintf("%s-%d", id, n) }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := inboundCheck(t, tc.keyed)
			last := rs[len(rs)-1]
			if last.Case != "inbound: a redelivered message has one key" || last.Pass != tc.pass {
				t.Fatalf("inbound case %+v, want pass=%v", last, tc.pass)
			}
			if Passed(rs) != tc.pass {
				t.Fatalf("Passed = %v with %+v", Passed(rs), rs)
			}
		})
	}
}
