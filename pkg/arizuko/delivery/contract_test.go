package delivery

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/adapter"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// contractRig is a store with one outbound message for platform "test",
// whose adapter is h, registered with a signing secret.
func contractRig(t *testing.T, h http.Handler) (*store.Store, *Deliverer, store.Outbound) {
	t.Helper()
	ctx := context.Background()
	st := openStore(t, filepath.Join(t.TempDir(), "a.db"))
	t.Cleanup(func() { st.Close() })
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if err := st.SetAdapter(ctx, store.Adapter{Platform: "test", CallbackURL: srv.URL, Secret: "s3cret"}); err != nil {
		t.Fatal(err)
	}
	o, err := st.PutOutbound(ctx, store.Outbound{ChatJID: "test:1", Platform: "test", Folder: "f", Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	d := New(Options{Store: st, BaseDelay: 10 * time.Millisecond, MaxDelay: 5 * time.Second, Poll: 10 * time.Millisecond, MaxAttempts: 4})
	return st, d, o
}

// deliverUntil runs passes until the message leaves pending or the time is up.
func deliverUntil(t *testing.T, st *store.Store, d *Deliverer, id int64, within time.Duration) store.Outbound {
	t.Helper()
	ctx := context.Background()
	var o store.Outbound
	eventually.Within(within, func() bool {
		d.DeliverDue(ctx)
		var err error
		if o, err = st.GetOutbound(ctx, id); err != nil {
			t.Fatal(err)
		}
		return o.Status != "pending"
	})
	return o
}

// A delivery whose answer is lost is retried under the same key, and an
// adapter that dedupes on it puts the message on the platform once.
func TestDeliveryLostAnswerSendsOnce(t *testing.T) {
	var mu sync.Mutex
	var posted []string
	h := &adapter.Handler{Secret: "s3cret", Send: func(_ context.Context, d adapter.Delivery) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		posted = append(posted, d.Key)
		return "p1", nil
	}}
	var calls atomic.Int32
	lossy := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			// The adapter sends, then the answer never reaches the daemon.
			h.ServeHTTP(httptest.NewRecorder(), r)
			conn, _, _ := w.(http.Hijacker).Hijack()
			conn.Close()
			return
		}
		h.ServeHTTP(w, r)
	})
	st, d, o := contractRig(t, lossy)
	got := deliverUntil(t, st, d, o.ID, 5*time.Second)
	if got.Status != "sent" || got.Attempts != 2 {
		t.Fatalf("message %s after %d attempts, want sent after 2", got.Status, got.Attempts)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(posted) != 1 || posted[0] != adapter.KeyOf(o.ID) {
		t.Fatalf("the platform got %q, want one message keyed %q", posted, adapter.KeyOf(o.ID))
	}
}

// A 429 holds the next attempt back for its Retry-After, far past the
// backoff; a 410 fails the message at once.
func TestDeliveryHonoursRetryAfterAndGone(t *testing.T) {
	var mu sync.Mutex
	var at []time.Time
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := adapter.Verify(r.Header, "s3cret", time.Now(), nil); err == nil {
			t.Errorf("an empty body verified: the signature does not cover the body")
		}
		mu.Lock()
		defer mu.Unlock()
		at = append(at, time.Now())
		if len(at) == 1 {
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	st, d, o := contractRig(t, h)
	got := deliverUntil(t, st, d, o.ID, 5*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if got.Status != "sent" || len(at) != 2 {
		t.Fatalf("message %s after %d calls, want sent after 2", got.Status, len(at))
	}
	if gap := at[1].Sub(at[0]); gap < time.Second {
		t.Fatalf("retried %s after a 429 with Retry-After: 1", gap)
	}

	var gone atomic.Int32
	st, d, o = contractRig(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gone.Add(1)
		w.WriteHeader(http.StatusGone)
	}))
	got = deliverUntil(t, st, d, o.ID, 5*time.Second)
	if got.Status != "failed" || gone.Load() != 1 {
		t.Fatalf("a 410 left the message %s after %d calls, want failed after 1", got.Status, gone.Load())
	}
}

// Every call is signed with the registered secret and keyed; an edit row
// goes to /edit naming the key of the message it replaces.
func TestDeliverySignsAndEdits(t *testing.T) {
	type call struct {
		path, key, body string
		verr            error
	}
	var calls []call
	var mu sync.Mutex
	h := &adapter.Handler{Secret: "s3cret",
		Send: func(_ context.Context, d adapter.Delivery) (string, error) { return "p-" + d.Key, nil },
		Edit: func(_ context.Context, e adapter.Edit, pid string) error {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, call{path: "/edit", key: e.EditOf, body: pid + "=" + e.Text})
			return nil
		}}
	st, d, o := contractRig(t, h)
	if got := deliverUntil(t, st, d, o.ID, 5*time.Second); got.Status != "sent" {
		t.Fatalf("signed send: %s", got.Status)
	}
	e, err := st.PutOutbound(context.Background(), store.Outbound{ChatJID: "test:1", Platform: "test", Folder: "f", Text: "hello, edited", EditOf: o.ID})
	if err != nil {
		t.Fatal(err)
	}
	if got := deliverUntil(t, st, d, e.ID, 5*time.Second); got.Status != "sent" || got.EditOf != o.ID {
		t.Fatalf("edit: %s, edit_of %d", got.Status, got.EditOf)
	}
	want := "p-" + adapter.KeyOf(o.ID) + "=hello, edited"
	mu.Lock()
	n := len(calls)
	mu.Unlock()
	if n != 1 || calls[0].body != want {
		t.Fatalf("edits %+v, want one replacing %s", calls, want)
	}

	// The same store with a wrong secret: every call refused, never sent.
	ctx := context.Background()
	a, _ := st.GetAdapter(ctx, "test")
	a.Secret = "not-the-secret"
	st.SetAdapter(ctx, a)
	o2, _ := st.PutOutbound(ctx, store.Outbound{ChatJID: "test:1", Platform: "test", Folder: "f", Text: "forged"})
	if got := deliverUntil(t, st, d, o2.ID, 5*time.Second); got.Status != "failed" {
		t.Fatalf("a delivery signed with the wrong secret ended %s, want failed", got.Status)
	}
}
