package lograte

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a hand-moved clock for the windows.
type clock struct{ t time.Time }

func (c *clock) now() time.Time       { return c.t }
func (c *clock) step(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *clock                { return &clock{t: time.Unix(1e9, 0)} }

type event struct {
	after  time.Duration // clock step before the record
	msg    string
	client string
}

func TestHandler(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      Options
		events []event
		want   []string // lines written, in order, as "msg client=… suppressed=…"
	}{
		{"one per window, the next says what it stands for",
			Options{Every: 10 * time.Second},
			[]event{{0, "refused", ""}, {time.Second, "refused", ""}, {time.Second, "refused", ""}, {10 * time.Second, "refused", ""}},
			[]string{"msg=refused", "msg=refused suppressed=2"}},
		{"burst lets n through per window",
			Options{Every: time.Minute, Burst: 2},
			[]event{{0, "x", ""}, {0, "x", ""}, {0, "x", ""}, {time.Minute, "x", ""}},
			[]string{"msg=x", "msg=x", "msg=x suppressed=1"}},
		{"messages are limited apart",
			Options{Every: time.Minute},
			[]event{{0, "a", ""}, {0, "b", ""}, {0, "a", ""}, {0, "b", ""}},
			[]string{"msg=a", "msg=b"}},
		{"one client's flood does not hide another's first line",
			Options{Every: time.Minute, Key: "client"},
			[]event{{0, "exfil", "c1"}, {0, "exfil", "c1"}, {0, "exfil", "c2"}, {0, "exfil", "c1"}},
			[]string{"msg=exfil client=c1", "msg=exfil client=c2"}},
		{"without a key the client does not split the window",
			Options{Every: time.Minute},
			[]event{{0, "exfil", "c1"}, {0, "exfil", "c2"}},
			[]string{"msg=exfil client=c1"}},
		{"the count attribute can be named",
			Options{Every: time.Second, Count: "refused_since_last"},
			[]event{{0, "r", ""}, {0, "r", ""}, {time.Second, "r", ""}},
			[]string{"msg=r", "msg=r refused_since_last=1"}},
		{"zero window lets all through",
			Options{},
			[]event{{0, "r", ""}, {0, "r", ""}},
			[]string{"msg=r", "msg=r"}},
		{"a full key table forgets the oldest window, not the newest",
			Options{Every: time.Minute, Key: "client", MaxKeys: 2},
			[]event{{0, "x", "c1"}, {time.Second, "x", "c2"}, {time.Second, "x", "c3"}, {0, "x", "c2"}, {0, "x", "c1"}},
			[]string{"msg=x client=c1", "msg=x client=c2", "msg=x client=c3", "msg=x client=c1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClock()
			tc.o.Now = c.now
			var buf bytes.Buffer
			log := New(tc.o).Logger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{
				ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
					if a.Key == slog.TimeKey || a.Key == slog.LevelKey {
						return slog.Attr{}
					}
					return a
				},
			})))
			for _, e := range tc.events {
				c.step(e.after)
				if e.client != "" {
					log.Warn(e.msg, "client", e.client)
				} else {
					log.Warn(e.msg)
				}
			}
			got := strings.Split(strings.TrimSpace(buf.String()), "\n")
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// The key is found in attributes a logger carries from With as well as in the record.
func TestHandlerKeyFromWith(t *testing.T) {
	var buf bytes.Buffer
	l := New(Options{Every: time.Hour, Key: "client", Now: newClock().now}).Logger(slog.New(slog.NewTextHandler(&buf, nil)))
	for range 3 {
		l.With("client", "c1").Warn("x")
		l.With("client", "c2").Warn("x")
	}
	if n := strings.Count(buf.String(), "msg=x"); n != 2 {
		t.Fatalf("%d lines, want one per client:\n%s", n, &buf)
	}
}

// Many goroutines racing one window let exactly one record through.
func TestHandlerConcurrent(t *testing.T) {
	var buf syncBuffer
	l := New(Options{Every: time.Hour}).Logger(slog.New(slog.NewTextHandler(&buf, nil)))
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 100 {
				l.Warn("flood")
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "msg=flood"); n != 1 {
		t.Fatalf("%d of 6400 records passed in one window, want 1", n)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
