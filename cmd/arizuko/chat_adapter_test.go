package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
)

// The terminal chat is an adapter like any other: while a session is open,
// its callback passes the conformance kit, and what the kit delivered is
// printed once per key, the retry not again.
func TestChatPassesConformance(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	in, typed := io.Pipe()
	var out, status bytes.Buffer
	c := &chatSession{base: base, token: token, folder: "a", chat: "web:a", sender: "tester", platform: "term-kit",
		in: in, out: &out, status: &status, poll: 50 * time.Millisecond}
	done := make(chan error, 1)
	go func() { done <- c.run(ctx) }()

	var cb, secret string
	eventually.True(t, time.Minute, "the chat's adapter is registered", func() bool {
		a, err := st.GetAdapter(ctx, "term-kit")
		cb, secret = a.CallbackURL, a.Secret
		return err == nil
	})
	rs, err := adapter.Check(ctx, adapter.KitConfig{URL: cb, Secret: secret, Chat: "web:a"})
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	adapter.PrintTable(&table, rs)
	if !adapter.Passed(rs) {
		t.Fatalf("the terminal chat fails the adapter conformance kit:\n%s", table.String())
	}
	t.Logf("terminal chat conformance:\n%s", table.String())
	// A real turn's reply still arrives through the signed path.
	io.WriteString(typed, "hello\n")
	typed.Close()
	if err := <-done; err != nil {
		t.Fatalf("chat: %v (status %q)", err, status.String())
	}
	got := out.String()
	for _, want := range []string{"check first", "check second", "check attachment", "(edited) edited by the conformance check", "a> echo: hello"} {
		if n := strings.Count(got, want); n != 1 {
			t.Errorf("%q printed %d times, want once:\n%s", want, n, got)
		}
	}
}

// A line whose POST reached the daemon but whose answer was lost is sent
// again under the same key: one message stored, one turn, one reply.
func TestChatLineLostAnswerStoredOnce(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	target, _ := url.Parse(base)
	fwd := httputil.NewSingleHostReverseProxy(target)
	var dropped atomic.Bool
	lossy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/v1/messages" && dropped.CompareAndSwap(false, true) {
			fwd.ServeHTTP(httptest.NewRecorder(), r) // the daemon stores it …
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close() // … and the answer never arrives
			return
		}
		fwd.ServeHTTP(w, r)
	}))
	defer lossy.Close()
	var out, status bytes.Buffer
	c := &chatSession{base: lossy.URL, token: token, folder: "a", chat: "web:a", sender: "tester",
		in: strings.NewReader("hello\n"), out: &out, status: &status, poll: 50 * time.Millisecond}
	if err := c.run(ctx); err != nil {
		t.Fatalf("chat: %v (status %q)", err, status.String())
	}
	if !dropped.Load() {
		t.Fatal("no answer was lost")
	}
	if got := out.String(); got != "a> echo: hello\n" {
		t.Fatalf("chat printed %q (status %q)", got, status.String())
	}
	ms, _ := st.ListMessages(ctx, "web:a", 0, 0)
	in := 0
	for _, m := range ms {
		if m.Direction == "in" {
			in++
		}
	}
	if in != 1 {
		t.Fatalf("%d inbound messages stored for one line: %+v", in, ms)
	}
	if ts, _ := st.ListTurns(ctx, "a", 10); len(ts) != 1 {
		t.Fatalf("%d turns for one line", len(ts))
	}
}
