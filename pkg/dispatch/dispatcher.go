package dispatch

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/pkg/gated"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/turn"
)

// Options configure a Dispatcher.
type Options struct {
	JS    jetstream.JetStream
	Setup Setup
	// Gated serves the tool calls runners carry back; the turn's grants and
	// audit are checked here, never on the runner.
	Gated *gated.Server
	// Require names the labels a folder's runner must have (nil: none).
	Require func(folder string) []string
	Log     *slog.Logger
}

// Dispatcher is the control plane's turn.Runner: each attempt becomes a work
// item, and Run returns the outcome the lease holder reports.
type Dispatcher struct {
	o Options

	mu      sync.Mutex
	flights map[string]*flight // by dispatch id
}

// flight is one published attempt the queue waits for.
type flight struct {
	item Item
	job  turn.Job
	done chan Outcome

	// Set by each accepted claim: the runner that claimed, a fresh reply
	// sequence, and the context of its tool calls, ended by the next claim.
	runner   string
	seq      *atomic.Int64
	sessions *atomic.Int32 // tool sessions open under this claim
	ctx      context.Context
	cancel   context.CancelFunc
}

var _ turn.Runner = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher over a Setup made by Ensure.
func NewDispatcher(o Options) *Dispatcher {
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Require == nil {
		o.Require = func(string) []string { return nil }
	}
	return &Dispatcher{o: o, flights: map[string]*flight{}}
}

func newID() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Run publishes j's attempt and waits for its outcome or for ctx to end. A
// publish that fails (a NATS node down, a leader election) is retried.
func (d *Dispatcher) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	it := Item{Turn: j.Turn.ID, Attempt: j.Turn.Attempts + 1, Dispatch: newID(), Folder: j.Turn.Folder, Require: d.o.Require(j.Turn.Folder)}
	f := &flight{item: it, job: j, done: make(chan Outcome, 1)}
	d.mu.Lock()
	d.flights[it.Dispatch] = f
	d.mu.Unlock()
	defer func() {
		d.mu.Lock()
		delete(d.flights, it.Dispatch)
		if f.cancel != nil {
			f.cancel()
		}
		d.mu.Unlock()
	}()
	log := d.o.Log.With("turn", it.Turn, "attempt", it.Attempt, "folder", it.Folder, "dispatch", it.Dispatch)
	data, _ := json.Marshal(it)
	for {
		_, err := d.o.JS.Publish(ctx, Subject, data, jetstream.WithMsgID(it.Dispatch))
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return turn.Result{Exit: jail.ExitFailed}, ctx.Err()
		}
		log.Warn("publish turn; retrying", "err", err)
		select {
		case <-ctx.Done():
			return turn.Result{Exit: jail.ExitFailed}, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	log.Info("turn dispatched", "require", it.Require)
	d.warnUnserved(ctx, it)
	select {
	case o := <-f.done:
		return d.result(o, j)
	case <-ctx.Done():
		return turn.Result{Exit: jail.ExitFailed}, ctx.Err()
	}
}

func (d *Dispatcher) result(o Outcome, j turn.Job) (turn.Result, error) {
	if j.Stdout != nil && o.Output != "" {
		j.Stdout.Write([]byte(o.Output))
	}
	if j.Answer != nil && o.Answer != "" {
		j.Answer.Write([]byte(o.Answer))
	}
	res := turn.Result{Exit: o.Exit, ExecError: o.ExecError, Egress: o.Egress, Guarded: o.Guarded}
	if o.Error == "" {
		return res, nil
	}
	err := fmt.Errorf("runner: %s", o.Error)
	if o.Terminal {
		err = fmt.Errorf("%w: %w", err, turn.ErrTerminal)
	}
	return res, err
}

// verify finds c's flight and checks that runner holds the folder's lease
// for exactly that dispatch; it returns the lease revision.
func (d *Dispatcher) verify(ctx context.Context, runner string, c Claim) (*flight, uint64, error) {
	d.mu.Lock()
	f := d.flights[c.Dispatch]
	d.mu.Unlock()
	if f == nil || f.item.Turn != c.Turn || f.item.Attempt != c.Attempt {
		return nil, 0, fmt.Errorf("turn %d attempt %d dispatch %q: %w", c.Turn, c.Attempt, c.Dispatch, ErrStale)
	}
	e, err := d.o.Setup.Leases.Get(ctx, LeaseKey(f.item.Folder))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, 0, fmt.Errorf("folder %s has no lease: %w", f.item.Folder, ErrNotHolder)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("lease of %s: %w", f.item.Folder, err)
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil || l.Runner != runner || l.Dispatch != c.Dispatch {
		return nil, 0, fmt.Errorf("lease of %s is held by %q for dispatch %q, not by %q for %q: %w",
			f.item.Folder, l.Runner, l.Dispatch, runner, c.Dispatch, ErrNotHolder)
	}
	return f, e.Revision(), nil
}

// Claim hands the lease holder its job. A second claim of the same dispatch
// (the first runner died, its lease lapsed) ends the first claim's tool
// calls and starts the reply sequence again, so the re-run's replies carry
// the keys the first run's did.
func (d *Dispatcher) Claim(ctx context.Context, runner string, c Claim) (Work, error) {
	f, _, err := d.verify(ctx, runner, c)
	if err != nil {
		d.refused("claim", runner, c, err)
		return Work{}, err
	}
	d.mu.Lock()
	if f.cancel != nil {
		f.cancel()
	}
	f.runner, f.seq, f.sessions = runner, new(atomic.Int64), new(atomic.Int32)
	f.ctx, f.cancel = context.WithCancel(context.Background())
	d.mu.Unlock()
	j := f.job
	d.o.Log.Info("turn claimed", "turn", c.Turn, "attempt", c.Attempt, "runner", runner)
	return Work{Folder: j.Turn.Folder, Topic: j.Turn.Topic, Argv: j.Argv, Env: j.Env, Secrets: j.Secrets, Prompt: j.Prompt, GuestHome: j.GuestHome,
		Allow: j.Allow, MemoryMiB: j.MemoryMiB, CPUs: j.CPUs, Answer: j.Answer != nil}, nil
}

// session returns what a tool call of runner's claim c is served with.
func (d *Dispatcher) session(ctx context.Context, runner string, c Claim) (context.Context, gated.Turn, func(), error) {
	f, _, err := d.verify(ctx, runner, c)
	if err == nil && d.claimer(f) != runner {
		err = fmt.Errorf("turn %d is not claimed by %q: %w", c.Turn, runner, ErrNotHolder)
	}
	if err != nil {
		d.refused("tool session", runner, c, err)
		return nil, gated.Turn{}, nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// A turn's guest opens its sessions through the runner, so the bound a local
	// socket has (gated.MaxSessions) holds here too.
	open := f.sessions
	if n := open.Add(1); n > gated.MaxSessions {
		open.Add(-1)
		return nil, gated.Turn{}, nil, fmt.Errorf("turn %d has %d tool sessions open, at most %d: %w", c.Turn, n-1, gated.MaxSessions, ErrTooManySessions)
	}
	t, seq := f.job.MCP, f.seq
	t.ReplyKey = func() string { return fmt.Sprintf("%d:%d:%d", c.Turn, c.Attempt, seq.Add(1)) }
	return f.ctx, t, func() { open.Add(-1) }, nil
}

// Report accepts the lease holder's outcome, once, and frees the lease.
func (d *Dispatcher) Report(ctx context.Context, runner string, o Outcome) error {
	f, rev, err := d.verify(ctx, runner, o.Claim)
	if err == nil && d.claimer(f) != runner {
		err = fmt.Errorf("turn %d is not claimed by %q: %w", o.Turn, runner, ErrNotHolder)
	}
	if err != nil {
		d.refused("outcome", runner, o.Claim, err)
		return err
	}
	select {
	case f.done <- o:
	default:
		return fmt.Errorf("turn %d attempt %d: outcome already reported: %w", o.Turn, o.Attempt, ErrStale)
	}
	if err := d.o.Setup.Leases.Delete(ctx, LeaseKey(f.item.Folder), jetstream.LastRevision(rev)); err != nil {
		d.o.Log.Debug("lease release", "folder", f.item.Folder, "err", err)
	}
	d.o.Log.Info("turn outcome", "turn", o.Turn, "attempt", o.Attempt, "runner", runner, "exit", o.Exit, "err", o.Error)
	return nil
}

// claimer is the runner whose claim of f was accepted last.
func (d *Dispatcher) claimer(f *flight) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return f.runner
}

// warnUnserved says so when no live runner has the labels an item needs:
// the turn waits until one comes.
func (d *Dispatcher) warnUnserved(ctx context.Context, it Item) {
	if len(it.Require) == 0 {
		return
	}
	keys, err := d.o.Setup.Runners.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return
	}
	for k := range keysOf(keys) {
		e, err := d.o.Setup.Runners.Get(ctx, k)
		if err != nil {
			continue
		}
		var a Advert
		if json.Unmarshal(e.Value(), &a) == nil && Satisfies(a.Labels, it.Require) {
			keys.Stop()
			return
		}
	}
	d.o.Log.Warn("no live runner has the labels this folder requires; the turn waits", "folder", it.Folder, "require", it.Require)
}

// keysOf is a lister's keys; none for a nil lister (an empty bucket).
func keysOf(l jetstream.KeyLister) <-chan string {
	if l == nil {
		c := make(chan string)
		close(c)
		return c
	}
	return l.Keys()
}

func (d *Dispatcher) refused(what, runner string, c Claim, err error) {
	d.o.Log.Warn("fleet request refused", "what", what, "runner", runner, "turn", c.Turn, "attempt", c.Attempt, "err", err)
}
