package lograte

import (
	"sync"
	"testing"
	"time"
)

func TestEveryLetsOneThroughPerInterval(t *testing.T) {
	e := Every{Interval: time.Hour}
	var wg sync.WaitGroup
	var mu sync.Mutex
	passed := 0
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 100 {
				if ok, _ := e.Allow(); ok {
					mu.Lock()
					passed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if passed != 1 {
		t.Fatalf("%d of 6400 events passed in one interval, want 1", passed)
	}
	e.last.Store(int64(time.Since(start) - 2*time.Hour)) // the interval has passed
	ok, held := e.Allow()
	if !ok || held != 6399 {
		t.Fatalf("after the interval: ok %v held %d, want true and 6399", ok, held)
	}
}

func TestEveryZeroIntervalLetsAllThrough(t *testing.T) {
	var e Every
	for i := range 3 {
		if ok, held := e.Allow(); !ok || held != 0 {
			t.Fatalf("event %d: ok %v held %d", i, ok, held)
		}
	}
}
