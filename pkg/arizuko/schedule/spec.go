// Package schedule fires cron schedules into their folders: each due time
// of a schedule fires once, a downtime's missed runs fire once together, and
// of several control planes exactly one fires a due time (the store's
// compare-and-set when they share a database, a Claimer such as a NATS KV
// bucket when they do not).
package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ErrInvalid is a cron expression or time zone that cannot be used.
var ErrInvalid = errors.New("invalid schedule")

// parser takes the five standard fields, an optional leading seconds field
// and the @hourly-style descriptors.
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Spec is a parsed schedule: its cron times read in its zone.
type Spec struct {
	sched cron.Schedule
	loc   *time.Location
}

// Parse checks a cron expression and an IANA time zone ("" is UTC).
func Parse(expr, tz string) (Spec, error) {
	if tz == "" {
		tz = "UTC"
	}
	loc, err := time.LoadLocation(tz)
	if err != nil || tz == "Local" {
		return Spec{}, fmt.Errorf("time zone %q: want an IANA zone such as Europe/Prague or UTC: %w", tz, ErrInvalid)
	}
	if strings.Contains(expr, "TZ=") {
		return Spec{}, fmt.Errorf("cron %q: give the zone with --tz (tz), not inside the expression: %w", expr, ErrInvalid)
	}
	if len(expr) > 128 {
		return Spec{}, fmt.Errorf("cron expression is %d bytes, the limit is 128: %w", len(expr), ErrInvalid)
	}
	s, err := parser.Parse(expr)
	if err != nil {
		return Spec{}, fmt.Errorf("cron %q: %v (want \"MIN HOUR DOM MON DOW\", an optional leading seconds field, or @hourly/@daily/@every 10m): %w", expr, err, ErrInvalid)
	}
	sp := Spec{sched: s, loc: loc}
	if sp.Next(time.Now()).IsZero() {
		return Spec{}, fmt.Errorf("cron %q never fires: %w", expr, ErrInvalid)
	}
	return sp, nil
}

// Next is the first firing strictly after t.
func (s Spec) Next(t time.Time) time.Time { return s.sched.Next(t.In(s.loc)) }

// maxMissed bounds the count of missed runs a firing reports.
const maxMissed = 10000

// missed counts the runs after due up to now that a downtime skipped; they
// are folded into the one firing of due.
func (s Spec) missed(due, now time.Time) int {
	n := 0
	for t := s.Next(due); !t.After(now) && n < maxMissed; t = s.Next(t) {
		n++
	}
	return n
}
