// Package lograte keeps a peer that can trigger a log line at will from writing the
// operator's log at will: one line per interval gets through, the rest are counted.
package lograte

import (
	"sync/atomic"
	"time"
)

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
	now := time.Now().UnixNano()
	last := e.last.Load()
	if last != 0 && now-last < int64(e.Interval) || !e.last.CompareAndSwap(last, now) {
		e.held.Add(1)
		return false, 0
	}
	return true, e.held.Swap(0)
}
