package schedule

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// Claimer decides which of several control planes fires one due time of a
// schedule: Claim answers true to exactly one caller per (id, due).
type Claimer interface {
	Claim(ctx context.Context, id int64, due time.Time) (bool, error)
}

// Firing is one firing of a schedule.
type Firing struct {
	Schedule store.Schedule
	Due      time.Time // the due time it fires for (the oldest missed one after a downtime)
	Missed   int       // later due times a downtime skipped, folded into this firing
	At       time.Time // when it fired
}

// Scheduler fires the store's due schedules.
type Scheduler struct {
	Store *store.Store
	// Fire injects the turn; an error is audited as a refused firing.
	Fire func(ctx context.Context, f Firing) error
	// Claim is consulted after the store's compare-and-set; nil trusts the
	// store alone (one control plane, or several on one database).
	Claim Claimer
	// Now is the clock; nil is time.Now.
	Now func() time.Time
	// MaxWait bounds the sleep between passes of Run (0: 1s), so a schedule
	// added meanwhile is seen.
	MaxWait time.Duration
	Log     *slog.Logger // nil discards

	wakeOnce sync.Once
	wake     chan struct{}
}

func (s *Scheduler) wakeCh() chan struct{} {
	s.wakeOnce.Do(func() { s.wake = make(chan struct{}, 1) })
	return s.wake
}

// Wake makes Run look at the store now: a schedule just added may be due
// before Run's next pass.
func (s *Scheduler) Wake() {
	select {
	case s.wakeCh() <- struct{}{}:
	default:
	}
}

func (s *Scheduler) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

func (s *Scheduler) log() *slog.Logger {
	if s.Log != nil {
		return s.Log
	}
	return slog.New(slog.DiscardHandler)
}

// Tick fires every schedule due at the clock's now once and returns how
// many it fired.
func (s *Scheduler) Tick(ctx context.Context) (int, error) {
	now := s.now()
	due, err := s.Store.DueSchedules(ctx, now.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("due schedules: %w", err)
	}
	fired := 0
	for _, sc := range due {
		ok, err := s.fireOne(ctx, sc, now)
		if err != nil {
			s.log().Error("schedule", "id", sc.ID, "folder", sc.Folder, "err", err)
			continue
		}
		if ok {
			fired++
		}
	}
	return fired, nil
}

func (s *Scheduler) fireOne(ctx context.Context, sc store.Schedule, now time.Time) (bool, error) {
	due := time.UnixMilli(sc.NextRun)
	spec, err := Parse(sc.Cron, sc.TZ)
	var next time.Time
	missed := 0
	if err == nil {
		// The next run is after now, not after due: a downtime's missed
		// runs fire once, here, and are not replayed one by one.
		next, missed = spec.Next(now), spec.missed(due, now)
	} else {
		// A zone the host no longer knows: stop rather than fire in a loop.
		next = time.UnixMilli(1<<62 - 1)
	}
	won, cerr := s.Store.AdvanceSchedule(ctx, sc.ID, sc.NextRun, next.UnixMilli())
	if cerr != nil || !won {
		return false, cerr
	}
	if err != nil {
		return false, s.audit(ctx, sc, false, fmt.Sprintf("not fired: %v", err))
	}
	if s.Claim != nil {
		ok, err := s.Claim.Claim(ctx, sc.ID, due)
		if err != nil {
			// Unsure whether another control plane fired it: skipping one
			// firing is better than firing it twice.
			return false, s.audit(ctx, sc, false, fmt.Sprintf("due %s not fired: claim: %v", due.UTC().Format(time.RFC3339), err))
		}
		if !ok {
			s.log().Debug("schedule fired elsewhere", "id", sc.ID, "due", due)
			return false, nil
		}
	}
	f := Firing{Schedule: sc, Due: due, Missed: missed, At: now}
	reason := fmt.Sprintf("schedule %d due %s fired %s", sc.ID, due.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339Nano))
	if missed > 0 {
		reason += fmt.Sprintf(" (%d missed runs folded in)", missed)
	}
	if err := s.Fire(ctx, f); err != nil {
		return false, s.audit(ctx, sc, false, reason+": refused: "+err.Error())
	}
	s.log().Info("schedule fired", "id", sc.ID, "folder", sc.Folder, "due", due, "missed", missed)
	return true, s.audit(ctx, sc, true, reason)
}

// audit writes the row every firing leaves, fired or refused.
func (s *Scheduler) audit(ctx context.Context, sc store.Schedule, ok bool, reason string) error {
	return s.Store.Audit(ctx, acl.Decision{Allow: ok, Principal: sc.Owner, Action: "schedule:fire", Scope: sc.Folder, Reason: reason})
}

// Run fires schedules until ctx ends, waking at the earliest next run.
func (s *Scheduler) Run(ctx context.Context) {
	maxWait := s.MaxWait
	if maxWait <= 0 {
		maxWait = time.Second
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-s.wakeCh():
			if !t.Stop() {
				select {
				case <-t.C:
				default:
				}
			}
		}
		if _, err := s.Tick(ctx); err != nil && ctx.Err() == nil {
			s.log().Error("scheduler", "err", err)
		}
		wait := maxWait
		if at, ok, err := s.Store.NextScheduleRun(ctx); err == nil && ok {
			if d := time.Until(time.UnixMilli(at)); d < wait {
				wait = max(d, 0)
			}
		}
		t.Reset(wait)
	}
}
