package schedule

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

func openStore(t *testing.T) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), filepath.Join(t.TempDir(), "a.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.InsertFolder(context.Background(), store.Folder{Path: "acme"}, ""); err != nil {
		t.Fatal(err)
	}
	return st
}

// addAt stores a schedule whose next run is the first after t0.
func addAt(t *testing.T, st *store.Store, cron, tz string, t0 time.Time) store.Schedule {
	t.Helper()
	sp, err := Parse(cron, tz)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := st.InsertSchedule(context.Background(), store.Schedule{Folder: "acme", Cron: cron, TZ: tz, Prompt: "p", NextRun: sp.Next(t0).UnixMilli(), Owner: "user:admin"})
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// clock is a settable test clock: no test here sleeps on the wall clock.
type clock struct{ t atomic.Int64 }

func (c *clock) now() time.Time      { return time.UnixMilli(c.t.Load()) }
func (c *clock) set(t time.Time)     { c.t.Store(t.UnixMilli()) }
func newClock(t time.Time) *clock    { c := &clock{}; c.set(t); return c }
func utc(s string) time.Time         { t, _ := time.Parse(time.RFC3339, s); return t }
func (c *clock) add(d time.Duration) { c.set(c.now().Add(d)) }

type recorder struct {
	mu sync.Mutex
	fs []Firing
}

func (r *recorder) fire(_ context.Context, f Firing) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fs = append(r.fs, f)
	return nil
}

func (r *recorder) n() int { r.mu.Lock(); defer r.mu.Unlock(); return len(r.fs) }

// A schedule fires at its due time, not before; after a four-hour downtime
// its 47 missed runs fire once (one firing, 46 folded in), and the next run is the first after now.
func TestMissedRunsFireOnce(t *testing.T) {
	st := openStore(t)
	t0 := utc("2026-03-02T10:02:00Z")
	sc := addAt(t, st, "*/5 * * * *", "UTC", t0)
	c := newClock(t0)
	var r recorder
	s := &Scheduler{Store: st, Fire: r.fire, Now: c.now}
	ctx := context.Background()
	tick := func(want int) {
		t.Helper()
		if n, err := s.Tick(ctx); err != nil || n != want {
			t.Fatalf("at %s: fired %d (%v), want %d", c.now().Format(time.TimeOnly), n, err, want)
		}
	}
	tick(0)
	c.set(utc("2026-03-02T10:04:59Z"))
	tick(0)
	c.set(utc("2026-03-02T10:05:00Z"))
	tick(1)
	tick(0)
	// Down from 10:05 to 14:02: due 10:10 … 14:00 is 47 runs.
	c.set(utc("2026-03-02T14:02:30Z"))
	tick(1)
	tick(0)
	f := r.fs[1]
	if !f.Due.Equal(utc("2026-03-02T10:10:00Z")) || f.Missed != 46 {
		t.Fatalf("firing after the downtime: due %s missed %d, want 10:10 and 46", f.Due, f.Missed)
	}
	got, _ := st.GetSchedule(ctx, sc.ID)
	if next := time.UnixMilli(got.NextRun).UTC(); !next.Equal(utc("2026-03-02T14:05:00Z")) {
		t.Fatalf("next run %s, want 14:05", next)
	}
	audit, _ := st.ListAudit(ctx, 10)
	fires := 0
	for _, a := range audit {
		if a.Action == "schedule:fire" && a.Decision == "allow" && a.Scope == "acme" && a.Principal == "user:admin" {
			fires++
			if fires == 1 && !strings.Contains(a.Reason, "46 missed runs") {
				t.Errorf("audit reason %q does not say the missed runs", a.Reason)
			}
		}
	}
	if fires != 2 {
		t.Fatalf("%d schedule:fire audit rows, want one per firing (2): %+v", fires, audit)
	}
}

// A refused firing (the owner lost the right) is audited as a deny and
// still moves the schedule on, so it is not retried in a loop.
func TestRefusedFiringAudited(t *testing.T) {
	st := openStore(t)
	t0 := utc("2026-03-02T10:00:00Z")
	addAt(t, st, "@hourly", "UTC", t0)
	c := newClock(t0.Add(time.Hour))
	s := &Scheduler{Store: st, Now: c.now, Fire: func(context.Context, Firing) error { return errors.New("owner may not") }}
	for range 2 {
		if n, err := s.Tick(context.Background()); n != 0 || err != nil {
			t.Fatalf("fired %d %v", n, err)
		}
	}
	audit, _ := st.ListAudit(context.Background(), 10)
	if len(audit) != 1 || audit[0].Decision != "deny" || !strings.Contains(audit[0].Reason, "owner may not") {
		t.Fatalf("audit %+v, want one deny naming the reason", audit)
	}
}

// Cron times are read in the schedule's zone, across a DST change.
func TestTimeZones(t *testing.T) {
	cases := []struct {
		cron, tz, after, want string
	}{
		{"0 9 * * *", "UTC", "2026-01-10T12:00:00Z", "2026-01-11T09:00:00Z"},
		{"0 9 * * *", "America/New_York", "2026-01-10T12:00:00Z", "2026-01-10T14:00:00Z"}, // EST
		{"0 9 * * *", "America/New_York", "2026-07-10T12:00:00Z", "2026-07-10T13:00:00Z"}, // EDT
		{"0 9 * * *", "Europe/Prague", "2026-03-28T09:00:00Z", "2026-03-29T07:00:00Z"},    // the night CET turns CEST
		{"30 2 * * *", "Europe/Prague", "2026-03-28T12:00:00Z", "2026-03-30T00:30:00Z"},   // 02:30 does not exist on the 29th
		{"0 0 1 * *", "Asia/Tokyo", "2026-01-15T00:00:00Z", "2026-01-31T15:00:00Z"},
		{"15 * * * * *", "UTC", "2026-01-10T12:00:00Z", "2026-01-10T12:00:15Z"}, // a leading seconds field
		{"@every 90s", "UTC", "2026-01-10T12:00:00Z", "2026-01-10T12:01:30Z"},
	}
	for _, c := range cases {
		sp, err := Parse(c.cron, c.tz)
		if err != nil {
			t.Errorf("%s %s: %v", c.cron, c.tz, err)
			continue
		}
		if got := sp.Next(utc(c.after)).UTC(); !got.Equal(utc(c.want)) {
			t.Errorf("%q in %s after %s: %s, want %s", c.cron, c.tz, c.after, got.Format(time.RFC3339), c.want)
		}
	}
}

func TestParseRefuses(t *testing.T) {
	for _, c := range []struct{ cron, tz, want string }{
		{"", "UTC", "cron \"\""},
		{"61 * * * *", "UTC", "cron \"61 * * * *\""},
		{"* * *", "UTC", "cron \"* * *\""},
		{"@daily", "Mars/Base", "time zone \"Mars/Base\""},
		{"@daily", "Local", "time zone \"Local\""},
		{"TZ=UTC @daily", "UTC", "--tz"},
		{"0 0 30 2 *", "UTC", "never fires"},
	} {
		_, err := Parse(c.cron, c.tz)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Parse(%q, %q) = %v, want ErrInvalid naming %s", c.cron, c.tz, err, c.want)
		}
	}
}

// Two schedulers on one database race for each due time; the store's
// compare-and-set lets exactly one fire it.
func TestSharedStoreFiresOnce(t *testing.T) {
	st := openStore(t)
	t0 := utc("2026-03-02T10:00:00Z")
	addAt(t, st, "* * * * *", "UTC", t0)
	c := newClock(t0)
	var r recorder
	a := &Scheduler{Store: st, Fire: r.fire, Now: c.now}
	b := &Scheduler{Store: st, Fire: r.fire, Now: c.now}
	for i := 1; i <= 20; i++ {
		c.add(time.Minute)
		race(t, a, b)
		if r.n() != i {
			t.Fatalf("minute %d: %d firings, want %d", i, r.n(), i)
		}
	}
}

func race(t *testing.T, ss ...*Scheduler) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := s.Tick(context.Background()); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
}

// Two control planes of a fleet, each with its own database holding the
// same schedule, share a real NATS JetStream: the KV claim lets exactly one
// fire each due time. Without the claim both fire: the claim is what holds.
func TestFleetFiresOnce(t *testing.T) {
	cl := natstest.Start(t, 1)
	ctx := context.Background()
	claimer := func(name string) *KVClaimer {
		js, err := jetstream.New(cl.Connect())
		if err != nil {
			t.Fatal(err)
		}
		c, err := OpenClaimer(ctx, js, 1, name)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	t0 := utc("2026-03-02T10:00:00Z")
	c := newClock(t0)
	var r recorder
	var planes []*Scheduler
	for _, name := range []string{"cp-a", "cp-b"} {
		st := openStore(t)
		addAt(t, st, "* * * * *", "UTC", t0)
		planes = append(planes, &Scheduler{Store: st, Fire: r.fire, Now: c.now, Claim: claimer(name)})
	}
	for i := 1; i <= 10; i++ {
		c.add(time.Minute)
		race(t, planes...)
		if r.n() != i {
			t.Fatalf("minute %d: %d firings across the two control planes, want %d", i, r.n(), i)
		}
	}
	// Each due time has its claim, naming the plane that fired it.
	for _, f := range r.fs {
		e, err := planes[0].Claim.(*KVClaimer).KV.Get(ctx, claimKey(f.Schedule.ID, f.Due))
		if err != nil || (string(e.Value()) != "cp-a" && string(e.Value()) != "cp-b") {
			t.Fatalf("claim of %s: %v", f.Due, err)
		}
	}
	for _, p := range planes {
		p.Claim = nil
	}
	c.add(time.Minute)
	race(t, planes...)
	if r.n() != 12 {
		t.Fatalf("without the claim: %d firings, want both planes' (12): the test would not catch a missing claim", r.n())
	}
}

// Run sleeps until the earliest next run, and Wake makes it see a schedule
// added meanwhile at once rather than after its longest sleep. The bubble's
// clock stands still while Run sleeps, so only Wake can make it fire.
func TestRunWakes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := openStore(t)
		var r recorder
		s := &Scheduler{Store: st, Fire: r.fire, MaxWait: time.Hour}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		defer func() { cancel(); <-done }()
		synctest.Wait() // Run has made its first pass and sleeps for the hour
		if _, err := st.InsertSchedule(ctx, store.Schedule{Folder: "acme", Cron: "@hourly", TZ: "UTC", Prompt: "p", NextRun: time.Now().UnixMilli(), Owner: "user:admin"}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if r.n() != 0 {
			t.Fatalf("%d firings before Wake: Run was not asleep", r.n())
		}
		s.Wake()
		synctest.Wait()
		if r.n() != 1 {
			t.Fatalf("%d firings after Wake, want 1", r.n())
		}
	})
}

// Under the shipped NATS server config the control plane's identity claims
// due times, once each; a runner's identity cannot reach the claims, so a
// runner host can neither fire a schedule nor suppress one.
func TestShippedConfigClaims(t *testing.T) {
	sh := natstest.StartShipped(t, "127.0.0.1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := func(ctx context.Context, id string) (*KVClaimer, error) {
		js, err := jetstream.New(sh.Connect(sh.As(id)...))
		if err != nil {
			t.Fatal(err)
		}
		return OpenClaimer(ctx, js, 1, id)
	}
	// A refused request is never answered: a short wait is the answer.
	short := func() context.Context {
		c, cancel := context.WithTimeout(ctx, 2*time.Second)
		t.Cleanup(cancel)
		return c
	}
	cp, err := open(ctx, "control-plane")
	if err != nil {
		t.Fatalf("the control plane opens the claims bucket: %v", err)
	}
	due := utc("2026-03-02T10:00:00Z")
	if ok, err := cp.Claim(ctx, 1, due); !ok || err != nil {
		t.Fatalf("first claim: %v %v", ok, err)
	}
	if ok, err := cp.Claim(ctx, 1, due); ok || err != nil {
		t.Fatalf("second claim of the same due time: %v %v", ok, err)
	}
	if _, err := open(short(), "runner-1"); err == nil {
		t.Fatal("a runner's identity opened the schedule claims")
	}
	js, err := jetstream.New(sh.Connect(sh.As("runner-1")...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(short(), "$KV."+Bucket+"."+claimKey(1, due.Add(time.Minute)), []byte("runner-1")); err == nil {
		t.Fatal("a runner's identity wrote a claim")
	}
	if ok, err := cp.Claim(ctx, 1, due.Add(time.Minute)); !ok || err != nil {
		t.Fatalf("the control plane's claim after the runner's try: %v %v", ok, err)
	}
}
