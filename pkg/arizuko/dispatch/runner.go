package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// Contention backs off an item whose folder's lease another runner holds,
// or whose labels this runner lacks.
const contention = 500 * time.Millisecond

// RunnerOptions configure a Runner.
type RunnerOptions struct {
	ID       string // the runner's name: its token's (Client.Whoami)
	Capacity int    // live turns on this host; 0 = 1
	Labels   []string
	Setup    Setup
	Client   *Client
	Exec     turn.Runner  // runs each attempt: a turn.JailRunner in production
	DataDir  string       // folder homes and MCP sockets on this host
	Log      *slog.Logger // nil discards
}

// Runner pulls turns from the fleet stream and runs them.
type Runner struct {
	o    RunnerOptions
	ttl  time.Duration
	busy atomic.Int64
}

// NewRunner returns a Runner; call Run.
func NewRunner(ctx context.Context, o RunnerOptions) (*Runner, error) {
	if o.Capacity <= 0 {
		o.Capacity = 1
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.ID == "" || o.Exec == nil || o.Client == nil || o.DataDir == "" {
		return nil, errors.New("dispatch: a runner needs an ID, a Client, an Exec and a DataDir")
	}
	st, err := o.Setup.Leases.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("lease bucket: %w", err)
	}
	ttl := st.TTL()
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return &Runner{o: o, ttl: ttl}, nil
}

// Run pulls and runs turns until ctx ends. A turn cut off by the end goes
// back to the stream at once for another runner.
func (r *Runner) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); r.advertise(ctx) }()
	slots := make(chan struct{}, r.o.Capacity)
	r.o.Log.Info("runner pulling turns", "runner", r.o.ID, "capacity", r.o.Capacity, "labels", r.o.Labels, "lease_ttl", r.ttl)
	for ctx.Err() == nil {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			continue
		}
		batch, err := r.o.Setup.Consumer.Fetch(1, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			<-slots
			if ctx.Err() == nil {
				r.o.Log.Info("fetch turns; retrying", "err", err)
				sleep(ctx, 500*time.Millisecond)
			}
			continue
		}
		got := false
		for msg := range batch.Messages() {
			got = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-slots }()
				r.busy.Add(1)
				defer r.busy.Add(-1)
				r.handle(ctx, msg)
			}()
		}
		if !got {
			<-slots
		}
	}
	wg.Wait()
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// advertise keeps this runner's capacity, load and labels in RunnerBucket.
func (r *Runner) advertise(ctx context.Context) {
	for warned := false; ; {
		b, _ := json.Marshal(Advert{ID: r.o.ID, Capacity: r.o.Capacity, Busy: int(r.busy.Load()), Labels: r.o.Labels})
		_, err := r.o.Setup.Runners.Put(ctx, r.o.ID, b)
		switch {
		case err != nil && ctx.Err() == nil && !warned:
			// The entry is keyed by the token's name so a NATS server can
			// confine each runner to its own: a mismatch shows up here.
			r.o.Log.Warn("runner entry not written; its NATS user must be allowed to publish its own key",
				"subject", "$KV."+RunnerBucket+"."+r.o.ID, "err", err)
			warned = true
		case err == nil:
			warned = false
		}
		select {
		case <-ctx.Done():
			dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			r.o.Setup.Runners.Delete(dctx, r.o.ID)
			cancel()
			return
		case <-time.After(r.ttl):
		}
	}
}

// handle runs one work item under the folder's lease.
func (r *Runner) handle(ctx context.Context, msg jetstream.Msg) {
	var it Item
	if err := json.Unmarshal(msg.Data(), &it); err != nil || it.Turn == 0 || it.Folder == "" {
		r.o.Log.Warn("malformed work item dropped", "err", err)
		msg.Term()
		return
	}
	log := r.o.Log.With("turn", it.Turn, "attempt", it.Attempt, "folder", it.Folder)
	if !Satisfies(r.o.Labels, it.Require) {
		log.Debug("work item needs labels this runner lacks", "require", it.Require)
		msg.NakWithDelay(contention)
		return
	}
	h, err := acquire(ctx, r.o.Setup.Leases, r.ttl, it.Folder, Lease{Runner: r.o.ID, Turn: it.Turn, Attempt: it.Attempt, Dispatch: it.Dispatch}, log)
	if err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			log.Info("lease not taken", "err", err)
		}
		msg.NakWithDelay(contention)
		return
	}
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	kept := make(chan struct{})
	go func() { defer close(kept); h.keep(tctx, cancel, func() { msg.InProgress() }) }()
	finish := func(ack bool) {
		cancel(nil)
		<-kept
		if ack {
			msg.Ack()
		} else {
			msg.NakWithDelay(contention)
		}
	}
	c := Claim{Turn: it.Turn, Attempt: it.Attempt, Dispatch: it.Dispatch, Folder: it.Folder}
	w, err := r.o.Client.Claim(tctx, c)
	if err != nil {
		// A stale dispatch is dropped: its control plane no longer waits for it.
		stale := errors.Is(err, ErrStale)
		log.Info("claim refused", "err", err, "dropped", stale)
		finish(stale)
		h.release()
		return
	}
	h.confirmWith(func(ctx context.Context) error { return r.o.Client.Renew(ctx, c) })
	log.Info("turn running", "runner", r.o.ID)
	out := r.execute(tctx, it, c, w)
	if cause := context.Cause(tctx); errors.Is(cause, ErrLeaseLost) {
		log.Warn("turn stopped: lease lost; another runner runs it")
		finish(false)
		return
	}
	if ctx.Err() != nil {
		log.Info("turn cut off by shutdown; back to the stream")
		finish(false)
		h.release()
		return
	}
	if !r.report(tctx, log, out) {
		// The lease went while the control plane was away: the item goes
		// back, and the run it gets next keeps this run's reply keys.
		finish(false)
		return
	}
	finish(true)
	h.release()
}

// report delivers the outcome, retrying a control plane that is away for a
// moment while the lease holds. It is false when the outcome could not be
// delivered before the lease went.
func (r *Runner) report(ctx context.Context, log *slog.Logger, out Outcome) bool {
	for {
		ack, err := r.o.Client.ReportAck(ctx, out)
		switch {
		case err == nil:
			log.Info("turn reported", "exit", out.Exit, "err", out.Error, "home_version", ack.HomeVersion)
			if ack.HomeHash != "" {
				// This host's copy is the version just committed.
				r.homeCache().SetClean(out.Folder, ack.HomeHash)
			}
			return true
		case errors.Is(err, ErrStale), errors.Is(err, ErrNotHolder), errors.Is(err, ErrRefused):
			log.Warn("outcome refused", "err", err)
			return true
		case ctx.Err() != nil:
			log.Warn("outcome not reported", "err", err, "cause", context.Cause(ctx))
			return false
		}
		log.Info("report outcome; retrying", "err", err)
		sleep(ctx, 500*time.Millisecond)
	}
}
