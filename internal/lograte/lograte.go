// Package lograte keeps a peer that can trigger a log line at will from writing the
// operator's log at will: a slog.Handler lets a few records per key and window through
// and counts the rest, and the next record that gets through says how many it stands for.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Options shape a Limiter. The zero Every lets every record through.
type Options struct {
	// Every is the window; Burst records per key get through in each.
	Every time.Duration
	// Burst is how many records per key a window lets through; 0 means 1.
	Burst int
	// Key names the attribute whose value joins the message in the key, such as
	// "client", so one peer's flood does not hide another's first line. Empty keys
	// by message alone.
	Key string
	// Count names the attribute that carries the suppressed count; empty means
	// "suppressed".
	Count string
	// MaxKeys bounds the keys tracked at once; 0 means 1024. Past it the oldest
	// windows are forgotten, so a peer inventing keys costs memory it cannot grow.
	MaxKeys int
	// Now is the clock; nil means time.Now, whose monotonic reading a wall clock
	// step cannot move.
	Now func() time.Time
}

// Limiter is the state the handlers it makes share: one window per key.
type Limiter struct {
	o   Options
	mu  sync.Mutex
	per map[string]*window
}

type window struct {
	start      time.Time
	passed     int
	suppressed int64
}

// New returns a Limiter with o's defaults filled in.
func New(o Options) *Limiter {
	if o.Burst <= 0 {
		o.Burst = 1
	}
	if o.Count == "" {
		o.Count = "suppressed"
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 1024
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, per: map[string]*window{}}
}

// Logger returns a logger writing through log's handler, rate limited by l; a nil
// log discards.
func (l *Limiter) Logger(log *slog.Logger) *slog.Logger {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return slog.New(l.Handler(log.Handler()))
}

// Handler wraps next so the records it sees are rate limited by l.
func (l *Limiter) Handler(next slog.Handler) slog.Handler {
	return &handler{l: l, next: next}
}

// allow reports whether a record keyed k may pass and, if so, how many records
// with that key were suppressed since the last one that did.
func (l *Limiter) allow(k string) (bool, int64) {
	if l.o.Every <= 0 {
		return true, 0
	}
	now := l.o.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.per[k]
	if !ok {
		if len(l.per) >= l.o.MaxKeys {
			l.forgetOldest()
		}
		w = &window{start: now}
		l.per[k] = w
	}
	if now.Sub(w.start) >= l.o.Every {
		w.start, w.passed = now, 0
	}
	if w.passed >= l.o.Burst {
		w.suppressed++
		return false, 0
	}
	w.passed++
	n := w.suppressed
	w.suppressed = 0
	return true, n
}

// forgetOldest drops the window that started first. It is linear in MaxKeys, paid
// only when a new key arrives with the table full.
func (l *Limiter) forgetOldest() {
	var oldest string
	var at time.Time
	for k, w := range l.per {
		if oldest == "" || w.start.Before(at) {
			oldest, at = k, w.start
		}
	}
	delete(l.per, oldest)
}

type handler struct {
	l     *Limiter
	next  slog.Handler
	key   string // the Key attribute's value when set by WithAttrs
	group bool   // attributes added now land in a group, where Key is not looked for
}

func (h *handler) Enabled(ctx context.Context, lv slog.Level) bool {
	return h.next.Enabled(ctx, lv)
}

func (h *handler) Handle(ctx context.Context, r slog.Record) error {
	k := h.key
	if h.l.o.Key != "" && !h.group {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == h.l.o.Key {
				k = a.Value.String()
				return false
			}
			return true
		})
	}
	ok, n := h.l.allow(r.Message + "\x00" + k)
	if !ok {
		return nil
	}
	if n > 0 {
		r = r.Clone()
		r.AddAttrs(slog.Int64(h.l.o.Count, n))
	}
	return h.next.Handle(ctx, r)
}

func (h *handler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.next = h.next.WithAttrs(as)
	if h.l.o.Key != "" && !h.group {
		for _, a := range as {
			if a.Key == h.l.o.Key {
				c.key = a.Value.String()
			}
		}
	}
	return &c
}

func (h *handler) WithGroup(name string) slog.Handler {
	c := *h
	c.next = h.next.WithGroup(name)
	c.group = c.group || name != ""
	return &c
}
