package delivery

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

type fakeAdapter struct {
	mu      sync.Mutex
	failN   int // answer 503 to this many requests first
	calls   int
	got     []Payload
	srv     *httptest.Server
	arrived chan Payload
}

func newAdapter(t *testing.T, failN int) *fakeAdapter {
	a := &fakeAdapter{failN: failN, arrived: make(chan Payload, 16)}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/send" || r.Method != http.MethodPost {
			http.Error(w, "bad path", 404)
			return
		}
		var p Payload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		a.mu.Lock()
		a.calls++
		fail := a.calls <= a.failN
		if !fail {
			a.got = append(a.got, p)
		}
		a.mu.Unlock()
		if fail {
			http.Error(w, "try later", http.StatusServiceUnavailable)
			return
		}
		a.arrived <- p
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// fakeClock is a clock only the test moves.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func openStore(t *testing.T, path string) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestDeliveryRetriesThenSends(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"))
	defer st.Close()
	a := newAdapter(t, 2)
	if err := st.SetAdapter(ctx, store.Adapter{Platform: "test", CallbackURL: a.srv.URL}); err != nil {
		t.Fatal(err)
	}
	o, err := st.PutOutbound(ctx, store.Outbound{ChatJID: "test:1", Platform: "test", Folder: "f", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	d := New(Options{Store: st, BaseDelay: 20 * time.Millisecond, MaxDelay: 40 * time.Millisecond, Poll: 10 * time.Millisecond})
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go d.Run(rctx)
	select {
	case p := <-a.arrived:
		if p.ID != o.ID || p.Text != "hello" || p.ChatJID != "test:1" {
			t.Fatalf("payload %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("message never arrived")
	}
	var got store.Outbound
	eventually.True(t, time.Minute, "the delivered message is marked", func() bool {
		got, err = st.GetOutbound(ctx, o.ID)
		return err != nil || got.Status != "pending"
	})
	cancel()
	if got.Status != "sent" || got.Attempts != 3 {
		t.Fatalf("status %s attempts %d, want sent after 3", got.Status, got.Attempts)
	}
}

func TestDeliveryFailsAfterBound(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"))
	defer st.Close()
	a := newAdapter(t, 1000)
	st.SetAdapter(ctx, store.Adapter{Platform: "test", CallbackURL: a.srv.URL})
	o, _ := st.PutOutbound(ctx, store.Outbound{ChatJID: "test:1", Platform: "test", Text: "x"})
	clock := &fakeClock{t: time.Now()}
	d := New(Options{Store: st, MaxAttempts: 3, BaseDelay: time.Minute, MaxDelay: time.Hour, Now: clock.Now})
	// Each pass finds the message due again only once the clock passes its gap (one
	// minute, then two), and never after the third attempt failed it.
	for _, step := range []struct {
		advance time.Duration
		calls   int
	}{{0, 1}, {59 * time.Second, 1}, {time.Second, 2}, {time.Minute, 2}, {time.Minute, 3}, {time.Hour, 3}, {time.Hour, 3}} {
		clock.Advance(step.advance)
		d.DeliverDue(ctx)
		a.mu.Lock()
		calls := a.calls
		a.mu.Unlock()
		if calls != step.calls {
			t.Fatalf("after %s more the adapter saw %d calls, want %d", step.advance, calls, step.calls)
		}
	}
	got, _ := st.GetOutbound(ctx, o.ID)
	if got.Status != "failed" || got.Attempts != 3 {
		t.Fatalf("status %s attempts %d, want failed after 3", got.Status, got.Attempts)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.calls != 3 {
		t.Fatalf("adapter saw %d calls, want 3", a.calls)
	}
}

// A message left pending by a stopped daemon is delivered by the next one.
func TestDeliverySurvivesRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a.db")
	st := openStore(t, path)
	o, _ := st.PutOutbound(ctx, store.Outbound{ChatJID: "test:1", Platform: "test", Text: "later"})
	// No adapter yet: the attempt fails and the message stays pending, due again
	// a minute later.
	clock := &fakeClock{t: time.Now()}
	d := New(Options{Store: st, BaseDelay: time.Minute, Now: clock.Now})
	if n, err := d.DeliverDue(ctx); err != nil || n != 0 {
		t.Fatalf("delivered %d err %v with no adapter", n, err)
	}
	st.Close()

	st = openStore(t, path)
	defer st.Close()
	a := newAdapter(t, 0)
	st.SetAdapter(ctx, store.Adapter{Platform: "test", CallbackURL: a.srv.URL})
	clock.Advance(time.Minute)
	d = New(Options{Store: st, Now: clock.Now})
	if n, err := d.DeliverDue(ctx); err != nil || n != 1 {
		t.Fatalf("delivered %d err %v after restart, want 1", n, err)
	}
	if p := <-a.arrived; p.ID != o.ID || p.Text != "later" {
		t.Fatalf("payload %+v", p)
	}
}

func TestGapGrows(t *testing.T) {
	d := New(Options{BaseDelay: time.Second, MaxDelay: 10 * time.Second})
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for i, w := range want {
		if g := d.Gap(i + 1); g != w {
			t.Errorf("gap after attempt %d = %s, want %s", i+1, g, w)
		}
	}
}

func TestValidCallback(t *testing.T) {
	for _, c := range []struct {
		url string
		ok  bool
	}{{"http://127.0.0.1:9000", true}, {"https://a.example/x", true}, {"ftp://x", false}, {"/send", false}, {"http://", false}} {
		if err := ValidCallback(c.url); (err == nil) != c.ok {
			t.Errorf("ValidCallback(%q) = %v, want ok=%v", c.url, err, c.ok)
		}
	}
}
