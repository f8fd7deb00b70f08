package dispatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrLeaseLost ends a turn whose runner could not renew the folder's lease
// in time or found it taken: another runner may run the turn now.
var ErrLeaseLost = errors.New("folder lease lost")

// holder keeps one lease alive while its turn runs.
type holder struct {
	kv  jetstream.KeyValue
	key string
	val []byte
	ttl time.Duration
	log *slog.Logger

	mu  sync.Mutex
	rev uint64
}

// acquire creates the folder's lease; jetstream.ErrKeyExists means another
// runner holds it.
func acquire(ctx context.Context, kv jetstream.KeyValue, ttl time.Duration, folder string, l Lease, log *slog.Logger) (*holder, error) {
	val, _ := json.Marshal(l)
	key := LeaseKey(folder)
	rev, err := kv.Create(ctx, key, val)
	if err != nil {
		return nil, err
	}
	return &holder{kv: kv, key: key, val: val, ttl: ttl, log: log, rev: rev}, nil
}

// keep renews the lease every third of its TTL, calling progress each time,
// until ctx ends. A lease found changed or gone, or not renewed for two
// thirds of the TTL, cancels the turn with ErrLeaseLost: past that point
// another runner may take it, and two live turns of a folder must not overlap.
func (h *holder) keep(ctx context.Context, cancel context.CancelCauseFunc, progress func()) {
	t := time.NewTicker(h.ttl / 3)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		progress()
		h.mu.Lock()
		rctx, rcancel := context.WithTimeout(ctx, h.ttl/3)
		rev, err := h.kv.Update(rctx, h.key, h.val, h.rev)
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// An update that timed out may have landed: the lease is still
			// ours if it holds exactly our value.
			if e, gerr := h.kv.Get(rctx, h.key); gerr == nil && bytes.Equal(e.Value(), h.val) {
				rev, err = e.Revision(), nil
			}
		}
		rcancel()
		if err == nil {
			h.rev, last = rev, time.Now()
		}
		h.mu.Unlock()
		switch {
		case err == nil:
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
			h.log.Warn("lease lost: taken or expired", "key", h.key, "err", err)
			cancel(ErrLeaseLost)
			return
		case time.Since(last) > 2*h.ttl/3:
			h.log.Warn("lease lost: not renewed in time", "key", h.key, "err", err)
			cancel(ErrLeaseLost)
			return
		default:
			h.log.Info("lease renewal failed; retrying", "key", h.key, "err", err)
		}
	}
}

// release deletes the lease if it is still this holder's.
func (h *holder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.kv.Delete(ctx, h.key, jetstream.LastRevision(h.rev))
}
