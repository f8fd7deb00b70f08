// Package turn runs agent turns: a queue with one worker per folder (a folder
// has at most one live guest), an instance-wide cap on live guests whose
// freed slot goes at once to a waiting folder of the waiting tenant with the
// fewest live guests, and runTurn, which builds the prompt, binds the folder's
// MCP socket and runs the agent through a Runner, retrying what a retry can fix.
// Turns and their claimed messages live in the store, so a daemon that dies
// mid-turn runs the turn again when it starts.
package turn

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// Defaults.
const (
	DefaultMaxGuests       = 5
	DefaultMaxRetries      = 3
	DefaultRetryDelay      = 2 * time.Second
	DefaultSweep           = 5 * time.Second
	DefaultGuestHome       = "/home/node"
	DefaultObserveMessages = 20
	DefaultObserveChars    = 4000
)

// Control is what the queue needs from the service in the same process.
type Control interface {
	EffectiveAllowlist(ctx context.Context, folder string) ([]string, error)
	FolderSecrets(ctx context.Context, folder string) (map[string]string, error)
}

// Options configure a Queue.
type Options struct {
	Store   *store.Store
	Gate    *acl.Gate
	Control Control
	Gated   *gated.Server
	Runner  Runner
	DataDir string

	MaxGuests  int           // live guests for the instance; 0 = DefaultMaxGuests
	MaxRetries int           // retries of a failed turn; 0 = DefaultMaxRetries, <0 = none
	RetryDelay time.Duration // 0 = DefaultRetryDelay
	Sweep      time.Duration // how often to look for work nobody announced; 0 = DefaultSweep
	GuestHome  string        // 0 = DefaultGuestHome

	ObserveMessages int // per observed folder; 0 = DefaultObserveMessages
	ObserveChars    int // all observed context; 0 = DefaultObserveChars
	// CredentialKeys are folder secrets the agent always gets (its model
	// credential), on top of those named by shell:env:<KEY> grants; a key an
	// inject grant binds arrives as a placeholder instead.
	CredentialKeys []string
	// MaxTurnsPerDay is the instance default of a folder's turn budget over
	// a sliding 24 h; 0 = unlimited. A folder's own setting wins.
	MaxTurnsPerDay int
	// OnOutbound is called after the host stores an outbound message itself
	// (the budget notice), to wake delivery.
	OnOutbound func()
	// OnTurn is called as a turn starts (running) and as it ends, so the
	// chat's adapter can show that the agent is at work.
	OnTurn func(t store.Turn, running bool)
	Log    *slog.Logger // nil discards
}

// Queue schedules turns.
type Queue struct {
	o Options

	mu      sync.Mutex
	workers map[string]chan struct{} // folder → kick
	wg      sync.WaitGroup
	ctx     context.Context

	// Guest slots, all under mu.
	live    int            // live guests
	tenants map[string]int // tenant → live guests; absent when none
	granted map[string]int // tenant → grant number of its latest slot
	grants  int            // slots granted so far
	waiters []*waiter      // folders waiting for a slot, in arrival order
}

// waiter is a folder's turn waiting for a guest slot; ready closes when it
// holds one.
type waiter struct {
	folder, tenant string
	ready          chan struct{}
	done           bool // granted
}

// New returns a Queue; call Run.
func New(o Options) *Queue {
	if o.MaxGuests <= 0 {
		o.MaxGuests = DefaultMaxGuests
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	} else if o.MaxRetries < 0 {
		o.MaxRetries = 0
	}
	if o.RetryDelay <= 0 {
		o.RetryDelay = DefaultRetryDelay
	}
	if o.Sweep <= 0 {
		o.Sweep = DefaultSweep
	}
	if o.GuestHome == "" {
		o.GuestHome = DefaultGuestHome
	}
	if o.ObserveMessages <= 0 {
		o.ObserveMessages = DefaultObserveMessages
	}
	if o.ObserveChars <= 0 {
		o.ObserveChars = DefaultObserveChars
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	return &Queue{o: o, workers: map[string]chan struct{}{}, tenants: map[string]int{}, granted: map[string]int{}}
}

// Run sweeps for work (at start, which re-runs turns a dead daemon left, and
// every Sweep) until ctx ends, then waits for the workers: a turn cut off by
// the shutdown stays open in the store and runs again at the next start.
func (q *Queue) Run(ctx context.Context) {
	q.mu.Lock()
	q.ctx = ctx
	q.mu.Unlock()
	t := time.NewTicker(q.o.Sweep)
	defer t.Stop()
	for {
		q.sweep(ctx)
		select {
		case <-ctx.Done():
			q.wg.Wait()
			return
		case <-t.C:
		}
	}
}

func (q *Queue) sweep(ctx context.Context) {
	work, err := q.o.Store.PendingWork(ctx)
	if err != nil {
		if ctx.Err() == nil {
			q.o.Log.Error("turn sweep", "err", err)
		}
		return
	}
	for _, w := range work {
		q.Kick(w.Folder)
	}
}

// Kick tells the folder's worker there is work, starting it if needed.
// Before Run it does nothing: Run's first sweep finds the work.
func (q *Queue) Kick(folder string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ctx == nil || q.ctx.Err() != nil {
		return
	}
	if k, ok := q.workers[folder]; ok {
		select {
		case k <- struct{}{}:
		default:
		}
		return
	}
	k := make(chan struct{}, 1)
	q.workers[folder] = k
	q.wg.Add(1)
	go q.work(q.ctx, folder, k)
}

// Waiting reports the folders whose next turn waits for a guest slot.
func (q *Queue) Waiting() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, w := range q.waiters {
		out = append(out, w.folder)
	}
	return out
}

// work runs the folder's turns one after another until none is left.
func (q *Queue) work(ctx context.Context, folder string, kick chan struct{}) {
	defer q.wg.Done()
	for {
		did, err := q.step(ctx, folder)
		if err != nil && ctx.Err() == nil {
			q.o.Log.Error("turn worker", "folder", folder, "err", err)
			select {
			case <-ctx.Done():
			case <-time.After(q.o.RetryDelay):
			}
		}
		if ctx.Err() != nil {
			q.mu.Lock()
			delete(q.workers, folder)
			q.mu.Unlock()
			return
		}
		if did || err != nil {
			continue
		}
		q.mu.Lock()
		select {
		case <-kick:
			q.mu.Unlock()
			continue
		default:
			delete(q.workers, folder)
			q.mu.Unlock()
			return
		}
	}
}

// step runs one turn of the folder, if there is one: an open turn first,
// else a new turn claiming the oldest topic's unclaimed messages.
func (q *Queue) step(ctx context.Context, folder string) (bool, error) {
	open, err := q.o.Store.OpenTurns(ctx, folder)
	if err != nil {
		return false, err
	}
	var t store.Turn
	if len(open) > 0 {
		t = open[0]
	} else {
		work, err := q.o.Store.PendingWork(ctx)
		if err != nil {
			return false, err
		}
		found := false
		for _, w := range work {
			if w.Folder != folder {
				continue
			}
			msgs, err := q.o.Store.PendingInbound(ctx, folder, w.Topic, 200)
			if err != nil {
				return false, err
			}
			if len(msgs) == 0 {
				continue
			}
			if t, err = q.o.Store.CreateTurn(ctx, folder, w.Topic, msgs[0].ID, msgs[len(msgs)-1].ID); err != nil {
				return false, err
			}
			found = true
			break
		}
		if !found {
			return false, nil
		}
	}
	if q.o.OnTurn != nil {
		q.o.OnTurn(t, true)
		defer q.o.OnTurn(t, false)
	}
	q.runTurn(ctx, t)
	return true, nil
}

// acquire takes a guest slot, blocking while the instance is at its cap: a
// release hands the slot straight to one waiter, so a freed slot never sits
// idle. The turn stays queued meanwhile, never dropped.
func (q *Queue) acquire(ctx context.Context, folder string) (func(), error) {
	w := &waiter{folder: folder, tenant: router.Tenant(folder), ready: make(chan struct{})}
	q.mu.Lock()
	// Slots are free only while nobody waits, so taking one skips nobody.
	if q.live < q.o.MaxGuests {
		q.grant(w)
		q.mu.Unlock()
		return q.releaser(w.tenant), nil
	}
	q.waiters = append(q.waiters, w)
	q.mu.Unlock()
	q.o.Log.Info("turn waits for a guest slot", "folder", folder, "cap", q.o.MaxGuests)
	select {
	case <-w.ready:
		return q.releaser(w.tenant), nil
	case <-ctx.Done():
	}
	q.mu.Lock()
	if w.done {
		// Granted as ctx ended: pass the slot on.
		q.mu.Unlock()
		q.releaser(w.tenant)()
		return nil, ctx.Err()
	}
	q.waiters = slices.DeleteFunc(q.waiters, func(x *waiter) bool { return x == w })
	q.mu.Unlock()
	return nil, ctx.Err()
}

// releaser returns the function that gives back a slot of tenant and hands
// it to the next waiter.
//
// The next waiter is the oldest of the waiting tenant with the fewest live
// guests, ties going to the tenant granted a slot longest ago: tenants take
// turns, so a tenant with many busy folders cannot make another tenant's one
// message wait behind all of them, while a folder's own turns stay in order
// (one live turn per folder) and a tenant alone may still use every slot.
func (q *Queue) releaser(tenant string) func() {
	return func() {
		q.mu.Lock()
		defer q.mu.Unlock()
		q.live--
		if q.tenants[tenant]--; q.tenants[tenant] <= 0 {
			delete(q.tenants, tenant)
		}
		next := -1
		for i, w := range q.waiters {
			if next < 0 || q.before(w.tenant, q.waiters[next].tenant) {
				next = i
			}
		}
		if next >= 0 {
			w := q.waiters[next]
			q.waiters = slices.Delete(q.waiters, next, next+1)
			q.grant(w)
		}
		// A tenant with nothing live and nothing waiting is forgotten, so the map
		// stays as small as the tenants in play (with {sender} tenants, one per
		// sender); a tenant not known sorts as served longest ago.
		if q.tenants[tenant] == 0 && !slices.ContainsFunc(q.waiters, func(w *waiter) bool { return w.tenant == tenant }) {
			delete(q.granted, tenant)
		}
	}
}

// before reports whether tenant a is served before tenant b; q.mu is held.
func (q *Queue) before(a, b string) bool {
	if q.tenants[a] != q.tenants[b] {
		return q.tenants[a] < q.tenants[b]
	}
	return q.granted[a] < q.granted[b]
}

// grant gives w a slot; q.mu is held.
func (q *Queue) grant(w *waiter) {
	q.live++
	q.tenants[w.tenant]++
	q.grants++
	q.granted[w.tenant] = q.grants
	w.done = true
	close(w.ready)
}
