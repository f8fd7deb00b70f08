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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/crackbox/crackbox/internal/lograte"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/jail"
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
	// LeaseTTL is how long the holder of a claimed turn may stay quiet before
	// another runner's claim is accepted (0: DefaultLeaseTTL).
	LeaseTTL time.Duration
	// Gate audits refused fleet requests (nil: logged only).
	Gate *acl.Gate
	// HomeLimits bounds a folder's home (nil: no bound).
	HomeLimits func(folder string) home.Limits
	// KeepFailed says whether a folder commits the home of a turn that
	// failed terminally (nil: never).
	KeepFailed func(folder string) bool
	// Metrics registers the home counters (nil: not exported).
	Metrics prometheus.Registerer
	Log     *slog.Logger // nil discards
}

// refusedWarnEvery is how often a refused fleet request is logged.
const refusedWarnEvery = 10 * time.Second

// Dispatcher is the control plane's turn.Runner: each attempt becomes a work
// item, and Run returns the outcome the lease holder reports.
type Dispatcher struct {
	o Options

	mu      sync.Mutex
	flights map[string]*flight // by dispatch id
	// warned bounds the refusal warnings a runner can trigger at will;
	// refusals of a turn someone else holds are audited regardless.
	warned  *lograte.Limiter
	metrics homeMetrics
}

// flight is one published attempt the queue waits for.
type flight struct {
	item Item
	job  turn.Job
	done chan Outcome

	// Set by each accepted claim: the runner that claimed, when it was last
	// heard from, a fresh reply sequence, and the context of its tool calls,
	// ended by a takeover.
	runner   string
	seen     time.Time
	seq      *atomic.Int64
	sessions *atomic.Int32 // tool sessions open under this claim
	ctx      context.Context
	cancel   context.CancelFunc

	home *flightHome // what the claim fetched and sent of the folder's home
}

var _ turn.Runner = (*Dispatcher)(nil)

// NewDispatcher returns a Dispatcher over a Setup made by Ensure.
func NewDispatcher(o Options) *Dispatcher {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Require == nil {
		o.Require = func(string) []string { return nil }
	}
	if o.HomeLimits == nil {
		o.HomeLimits = func(string) home.Limits { return home.Limits{} }
	}
	if o.KeepFailed == nil {
		o.KeepFailed = func(string) bool { return false }
	}
	return &Dispatcher{o: o, flights: map[string]*flight{}, warned: lograte.New(lograte.Options{Every: refusedWarnEvery, Count: "held_back"}), metrics: newHomeMetrics(o.Metrics)}
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

// current finds c's flight: a dispatch the control plane still waits for.
func (d *Dispatcher) current(c Claim) (*flight, error) {
	d.mu.Lock()
	f := d.flights[c.Dispatch]
	d.mu.Unlock()
	if f == nil || f.item.Turn != c.Turn || f.item.Attempt != c.Attempt {
		return nil, fmt.Errorf("turn %d attempt %d dispatch %q: %w", c.Turn, c.Attempt, c.Dispatch, ErrStale)
	}
	return f, nil
}

// kvHolds checks that runner holds the folder's lease for exactly f's
// dispatch. It keeps two runners off one folder; it is asked only before a
// claim is accepted, never to pick between runners once one holds the turn.
func (d *Dispatcher) kvHolds(ctx context.Context, runner string, f *flight) error {
	e, err := d.o.Setup.Leases.Get(ctx, LeaseKey(f.item.Folder))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("folder %s has no lease: %w", f.item.Folder, ErrNotHolder)
	}
	if err != nil {
		return fmt.Errorf("lease of %s: %w", f.item.Folder, err)
	}
	var l Lease
	if err := json.Unmarshal(e.Value(), &l); err != nil || l.Runner != runner || l.Dispatch != f.item.Dispatch {
		return fmt.Errorf("lease of %s is held by %q for dispatch %q, not by %q for %q: %w",
			f.item.Folder, l.Runner, l.Dispatch, runner, f.item.Dispatch, ErrNotHolder)
	}
	return nil
}

// labelled checks that runner registered the labels f's folder requires:
// a runner that skips its own check must not get a turn meant for others.
func (d *Dispatcher) labelled(ctx context.Context, runner string, f *flight) error {
	if len(f.item.Require) == 0 {
		return nil
	}
	var a Advert
	e, err := d.o.Setup.Runners.Get(ctx, runner)
	if err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("runner %q's registration: %w", runner, err)
	}
	if err == nil {
		json.Unmarshal(e.Value(), &a)
	}
	if a.ID != runner || !Satisfies(a.Labels, f.item.Require) {
		return fmt.Errorf("runner %q registered labels %v; folder %s requires %v: %w", runner, a.Labels, f.item.Folder, f.item.Require, ErrNotHolder)
	}
	return nil
}

// holderErr is why runner may not claim f: another runner's claim was
// accepted first and the control plane heard from it within a lease TTL.
// The caller holds d.mu.
func (d *Dispatcher) holderErr(f *flight, runner string) error {
	if f.runner == "" || f.runner == runner {
		return nil
	}
	if quiet := time.Since(f.seen); quiet < d.o.LeaseTTL {
		return fmt.Errorf("turn %d is claimed by %q, heard from %s ago: %w", f.item.Turn, f.runner, quiet.Round(time.Millisecond), ErrNotHolder)
	}
	return nil
}

// Claim hands the job to the runner whose claim the control plane accepts
// first; a later claim by another runner is refused until the holder has
// been quiet for a lease TTL (it died), whatever the KV bucket says. A
// takeover ends the first claim's tool calls and starts the reply sequence
// again, so the re-run's replies carry the keys the first run's did.
func (d *Dispatcher) Claim(ctx context.Context, runner string, c Claim) (Work, error) {
	f, err := d.current(c)
	if err == nil {
		d.mu.Lock()
		err = d.holderErr(f, runner)
		d.mu.Unlock()
	}
	if err == nil {
		err = d.kvHolds(ctx, runner, f)
	}
	if err == nil {
		err = d.labelled(ctx, runner, f)
	}
	if err == nil {
		d.mu.Lock()
		// Another runner may have been accepted while the bucket was read.
		if err = d.holderErr(f, runner); err == nil {
			if f.cancel != nil {
				f.cancel()
			}
			f.runner, f.seen, f.seq, f.sessions = runner, time.Now(), new(atomic.Int64), new(atomic.Int32)
			f.ctx, f.cancel = context.WithCancel(context.Background())
			f.home = nil
		}
		d.mu.Unlock()
	}
	if err != nil {
		d.refused(ctx, "claim", runner, c, err)
		return Work{}, err
	}
	j := f.job
	d.o.Log.Info("turn claimed", "turn", c.Turn, "attempt", c.Attempt, "runner", runner)
	return Work{Folder: j.Turn.Folder, Topic: j.Turn.Topic, Argv: j.Argv, Env: j.Env, Secrets: j.Secrets, Prompt: j.Prompt, GuestHome: j.GuestHome,
		Allow: j.Allow, MemoryMiB: j.MemoryMiB, CPUs: j.CPUs, Answer: j.Answer != nil, HomeLimits: d.o.HomeLimits(j.Turn.Folder)}, nil
}

// held finds c's flight if runner's claim of it is the accepted one.
func (d *Dispatcher) held(runner string, c Claim) (*flight, error) {
	f, err := d.current(c)
	if err != nil {
		return nil, err
	}
	if h := d.claimer(f); h != runner {
		return nil, fmt.Errorf("turn %d is claimed by %q, not %q: %w", c.Turn, h, runner, ErrNotHolder)
	}
	return f, nil
}

// Renew notes that the holder of c is alive: the control plane's own
// evidence, which a write to the KV bucket cannot fake.
func (d *Dispatcher) Renew(ctx context.Context, runner string, c Claim) error {
	f, err := d.held(runner, c)
	if err != nil {
		d.refused(ctx, "renew", runner, c, err)
		return err
	}
	d.mu.Lock()
	if f.runner == runner {
		f.seen = time.Now()
	}
	d.mu.Unlock()
	return nil
}

// session returns what a tool call of runner's claim c is served with.
func (d *Dispatcher) session(ctx context.Context, runner string, c Claim) (context.Context, gated.Turn, func(), error) {
	f, err := d.held(runner, c)
	if err != nil {
		d.refused(ctx, "mcp", runner, c, err)
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

// Report accepts the holder's outcome, once, committing the home the
// holder sent with it, and frees the folder's lease if it still names the
// holder's dispatch.
func (d *Dispatcher) Report(ctx context.Context, runner string, o Outcome) (OutcomeAck, error) {
	f, err := d.held(runner, o.Claim)
	if err != nil {
		d.refused(ctx, "outcome", runner, o.Claim, err)
		return OutcomeAck{}, err
	}
	if len(f.done) > 0 {
		return OutcomeAck{}, fmt.Errorf("turn %d attempt %d: outcome already reported: %w", o.Turn, o.Attempt, ErrStale)
	}
	ack, err := d.commitHome(ctx, f, o)
	if err != nil {
		return OutcomeAck{}, err
	}
	select {
	case f.done <- o:
		d.recordHomeStats(o.HomeStats)
	default:
		return OutcomeAck{}, fmt.Errorf("turn %d attempt %d: outcome already reported: %w", o.Turn, o.Attempt, ErrStale)
	}
	if e, err := d.o.Setup.Leases.Get(ctx, LeaseKey(f.item.Folder)); err == nil {
		var l Lease
		if json.Unmarshal(e.Value(), &l) == nil && l.Runner == runner && l.Dispatch == f.item.Dispatch {
			if err := d.o.Setup.Leases.Delete(ctx, LeaseKey(f.item.Folder), jetstream.LastRevision(e.Revision())); err != nil {
				d.o.Log.Debug("lease release", "folder", f.item.Folder, "err", err)
			}
		}
	}
	d.o.Log.Info("turn outcome", "turn", o.Turn, "attempt", o.Attempt, "runner", runner, "exit", o.Exit, "err", o.Error)
	return ack, nil
}

// claimer is the runner whose claim of f the control plane accepted.
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

// refused logs and audits a fleet request the control plane turned down:
// the operator sees a runner reaching for a turn it does not hold.
func (d *Dispatcher) refused(ctx context.Context, what, runner string, c Claim, err error) {
	d.warned.Logger(d.o.Log).Warn("fleet request refused", "what", what, "runner", runner, "turn", c.Turn, "attempt", c.Attempt, "err", err)
	if d.o.Gate == nil || !errors.Is(err, ErrNotHolder) {
		return
	}
	d.o.Gate.Refuse(context.WithoutCancel(ctx), acl.Decision{Principal: "runner:" + runner, Action: "fleet:" + what, Scope: c.Folder,
		Reason: fmt.Sprintf("turn %d attempt %d dispatch %q: %v", c.Turn, c.Attempt, c.Dispatch, err)})
}
