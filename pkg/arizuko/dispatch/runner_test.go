package dispatch

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// recorder is an agent that notes which runner ran which folder and, when
// told, blocks until its turn is stopped.
type recorder struct {
	name  string
	mu    *sync.Mutex
	ran   *[]string
	block chan struct{} // nil: answer at once; else block the first run
	once  *sync.Once
	cause *error
}

func (r recorder) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	r.mu.Lock()
	*r.ran = append(*r.ran, r.name+":"+j.Turn.Folder)
	r.mu.Unlock()
	first := false
	if r.once != nil {
		r.once.Do(func() { first = true })
	}
	if first {
		close(r.block)
		<-ctx.Done()
		r.mu.Lock()
		*r.cause = context.Cause(ctx)
		r.mu.Unlock()
		return turn.Result{Exit: 1}, ctx.Err()
	}
	return turn.Result{}, nil
}

// A folder that requires kvm=true runs only on the runner that has it; a
// folder without requirements runs wherever.
func TestLabelsPickTheRunner(t *testing.T) {
	require := func(f string) []string {
		if f == "kvm" {
			return []string{"kvm=true"}
		}
		return nil
	}
	p := newPlane(t, true, 3*time.Second, require, nil, "kvm", "any")
	var mu sync.Mutex
	var ran []string
	p.runner(t, "plain", nil, recorder{name: "plain", mu: &mu, ran: &ran})
	p.runner(t, "metal", []string{"kvm=true", "zone=a"}, recorder{name: "metal", mu: &mu, ran: &ran})
	for range 4 {
		p.post(t, "kvm", "x")
		eventually.True(t, 30*time.Second, "the kvm turn", func() bool { return p.idle(t) })
	}
	mu.Lock()
	defer mu.Unlock()
	for _, r := range ran {
		if r != "metal:kvm" {
			t.Errorf("turn ran as %s; only the kvm=true runner may run folder kvm", r)
		}
	}
	if len(ran) != 4 {
		t.Fatalf("runs %v, want 4", ran)
	}
}

// A runner whose lease is taken from it stops its turn with ErrLeaseLost and
// reports nothing; the turn runs again under the new lease.
func TestLostLeaseStopsTheTurn(t *testing.T) {
	p := newPlane(t, true, 3*time.Second, nil, nil, "a")
	var mu sync.Mutex
	var ran []string
	var cause error
	started := make(chan struct{})
	p.runner(t, "r1", nil, recorder{name: "r1", mu: &mu, ran: &ran, block: started, once: new(sync.Once), cause: &cause})
	p.post(t, "a", "x")
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("turn did not start")
	}
	// r2 takes the turn over as after r1 went quiet for a lease TTL: r2's
	// lease in the bucket, and the control plane accepting r2's claim.
	e, err := p.setup.Leases.Get(p.ctx, LeaseKey("a"))
	if err != nil {
		t.Fatal(err)
	}
	var l Lease
	json.Unmarshal(e.Value(), &l)
	l.Runner = "r2"
	v, _ := json.Marshal(l)
	if _, err := p.setup.Leases.Put(p.ctx, LeaseKey("a"), v); err != nil {
		t.Fatal(err)
	}
	p.d.mu.Lock()
	p.d.flights[l.Dispatch].seen = time.Now().Add(-time.Hour)
	p.d.mu.Unlock()
	if _, err := p.d.Claim(p.ctx, "r2", Claim{Turn: l.Turn, Attempt: l.Attempt, Dispatch: l.Dispatch, Folder: "a"}); err != nil {
		t.Fatalf("r2's claim after r1 went quiet: %v", err)
	}
	eventually.True(t, 30*time.Second, "r1 to stop its turn", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return cause != nil
	})
	mu.Lock()
	if !errors.Is(cause, ErrLeaseLost) {
		t.Errorf("turn stopped by %v, want %v", cause, ErrLeaseLost)
	}
	mu.Unlock()
	// r1's report never came: the queue still waits for the attempt, which
	// runs again once the taken lease lapses.
	if p.idle(t) {
		t.Fatal("the turn ended although its runner lost the lease")
	}
	eventually.True(t, 60*time.Second, "the turn to run again", func() bool { return p.idle(t) })
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 2 {
		t.Fatalf("runs %v, want the stopped one and the re-run", ran)
	}
}

// sessionHog is a guest that opens tool session after tool session through its
// runner and holds them all.
type sessionHog struct {
	opened chan net.Conn
}

func (h sessionHog) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	for range gated.MaxSessions + 4 {
		guestEnd, hostEnd := net.Pipe()
		go j.MCPConn(hostEnd)
		h.opened <- guestEnd
	}
	<-ctx.Done()
	return turn.Result{}, ctx.Err()
}

// A guest on a runner host holds as many tool sessions on the control plane as
// one on the control plane's own socket: gated.MaxSessions. The ones past it
// are closed, not served.
func TestToolSessionsPerTurnAreBounded(t *testing.T) {
	// A lease that outlives a loaded machine's slow renewals: this test is about sessions.
	p := newPlane(t, true, 30*time.Second, nil, nil, "acme")
	hog := sessionHog{opened: make(chan net.Conn, gated.MaxSessions+4)}
	p.runner(t, "r1", nil, hog)
	p.post(t, "acme", "x")
	var conns []net.Conn
	for range gated.MaxSessions + 4 {
		select {
		case c := <-hog.opened:
			conns = append(conns, c)
		case <-time.After(time.Minute):
			t.Fatalf("the turn opened %d sessions, want %d", len(conns), gated.MaxSessions+4)
		}
	}
	// A served session waits for the client's first message; a refused one ends.
	var closed atomic.Int32
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Read(make([]byte, 1)); errors.Is(err, io.EOF) || errors.Is(err, io.ErrClosedPipe) {
				closed.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := closed.Load(); n != 4 {
		t.Fatalf("%d of %d tool sessions were refused, want the 4 past %d", n, len(conns), gated.MaxSessions)
	}
}
