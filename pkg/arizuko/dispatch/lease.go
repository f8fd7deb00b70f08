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

	mu sync.Mutex
	// confirm asks the control plane whether this runner still holds the
	// claimed turn (nil before the claim): the bucket only keeps runners
	// apart, the control plane decides who holds a turn.
	confirm func(context.Context) error
	rev     uint64
	// at is when the stored revision was sent: the bucket wrote it no earlier,
	// so the lease lives at least until at+ttl.
	at time.Time
}

// acquire creates the folder's lease; jetstream.ErrKeyExists means another
// runner holds it.
func acquire(ctx context.Context, kv jetstream.KeyValue, ttl time.Duration, folder string, l Lease, log *slog.Logger) (*holder, error) {
	val, _ := json.Marshal(l)
	key := LeaseKey(folder)
	at := time.Now()
	rev, err := kv.Create(ctx, key, val)
	if err != nil {
		return nil, err
	}
	return &holder{kv: kv, key: key, val: val, ttl: ttl, log: log, rev: rev, at: at}, nil
}

// keep renews the lease every third of its TTL, calling progress each time,
// until ctx ends. A lease found changed or gone, or not renewed for two
// thirds of the TTL, cancels the turn with ErrLeaseLost: past that point
// another runner may take it, and two live turns of a folder must not overlap.
func (h *holder) keep(ctx context.Context, cancel context.CancelCauseFunc, progress func()) {
	t := time.NewTicker(h.ttl / 3)
	defer t.Stop()
	var first time.Time // when the first renewal since the last stored one was sent
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		progress()
		h.mu.Lock()
		// Count from when the last stored renewal was sent, not from its answer, and
		// let no attempt run past the give-up point: a hung renewal retried on the
		// next tick would otherwise hold the turn until the lease had expired.
		giveUp := h.at.Add(2 * h.ttl / 3)
		sent := time.Now()
		if first.IsZero() {
			first = sent
		}
		deadline := sent.Add(h.ttl / 3)
		if giveUp.Before(deadline) {
			deadline = giveUp
		}
		rctx, rcancel := context.WithDeadline(ctx, deadline)
		confirmed := false
		if h.confirm != nil {
			cerr := h.confirm(rctx)
			if errors.Is(cerr, ErrNotHolder) {
				h.mu.Unlock()
				rcancel()
				h.log.Warn("lease lost: the control plane gave the turn to another runner", "key", h.key, "err", cerr)
				cancel(ErrLeaseLost)
				return
			}
			confirmed = cerr == nil
		}
		rev, err := h.kv.Update(rctx, h.key, h.val, h.rev)
		at := sent
		if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
			// An update that timed out may have landed: the lease is still
			// ours if it holds exactly our value, written no earlier than
			// the first attempt since the last stored renewal.
			if e, gerr := h.kv.Get(rctx, h.key); gerr == nil && bytes.Equal(e.Value(), h.val) {
				rev, err, at = e.Revision(), nil, first
			}
		}
		if confirmed && (errors.Is(err, jetstream.ErrKeyRevisionMismatch) || errors.Is(err, jetstream.ErrKeyNotFound)) {
			// Someone rewrote the key, but the control plane says the turn is
			// ours: put our lease back so no runner starts the folder's next turn.
			h.log.Warn("lease rewritten by another; the control plane confirms this runner, restoring it", "key", h.key)
			rev, err = h.kv.Put(rctx, h.key, h.val)
		}
		rcancel()
		if err == nil {
			h.rev, h.at, first = rev, at, time.Time{}
		}
		h.mu.Unlock()
		switch {
		case err == nil:
		case errors.Is(err, jetstream.ErrKeyRevisionMismatch), errors.Is(err, jetstream.ErrKeyNotFound):
			h.log.Warn("lease lost: taken or expired", "key", h.key, "err", err)
			cancel(ErrLeaseLost)
			return
		case !time.Now().Before(giveUp):
			h.log.Warn("lease lost: not renewed in time", "key", h.key, "err", err)
			cancel(ErrLeaseLost)
			return
		default:
			h.log.Info("lease renewal failed; retrying", "key", h.key, "err", err)
		}
	}
}

// confirmWith sets how the holder checks its claim with the control plane.
func (h *holder) confirmWith(f func(context.Context) error) {
	h.mu.Lock()
	h.confirm = f
	h.mu.Unlock()
}

// release deletes the lease if it is still this holder's.
func (h *holder) release() {
	h.mu.Lock()
	defer h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	h.kv.Delete(ctx, h.key, jetstream.LastRevision(h.rev))
}
