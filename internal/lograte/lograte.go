// Package lograte keeps a peer that can trigger a log line at will from writing the
// operator's log at will: one line per interval gets through, the rest are counted.
package lograte

import (
	"sync/atomic"
	"time"
)

// start anchors the monotonic clock Every reads, so a step of the wall clock neither
// silences warnings nor lets a burst through.
var start = time.Now()

// Every lets one event through per Interval. The zero Interval lets every event through.
type Every struct {
	Interval time.Duration
	last     atomic.Int64
	held     atomic.Int64
}

// Allow reports whether this event may be logged and, if so, how many were held back
// since the last one that was, so the line can say what it stands for.
func (e *Every) Allow() (ok bool, held int64) {
	if e.Interval == 0 {
		return true, 0
	}
	now := int64(time.Since(start)) + 1 // never 0, which means "never logged"
	last := e.last.Load()
	if last != 0 && now-last < int64(e.Interval) || !e.last.CompareAndSwap(last, now) {
		e.held.Add(1)
		return false, 0
	}
	return true, e.held.Swap(0)
}
