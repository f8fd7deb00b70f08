package eventually

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

func TestWithin(t *testing.T) {
	var n atomic.Int32
	go func() {
		for range 3 {
			n.Add(1)
		}
	}()
	if !Within(10*time.Second, func() bool { return n.Load() == 3 }) {
		t.Fatal("a condition another goroutine makes true was not seen")
	}
	start := time.Now()
	if Within(30*time.Millisecond, func() bool { return false }) {
		t.Fatal("a condition that never holds was reported true")
	}
	if took := time.Since(start); took < 30*time.Millisecond || took > 5*time.Second {
		t.Fatalf("gave up after %s, want the 30ms given", took)
	}
}

// True fails the test, naming what it waited for, when the condition never holds.
func TestTrueFailsNamingTheCondition(t *testing.T) {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		True(r, 10*time.Millisecond, "the moon is cheese", func() bool { return false })
	}()
	<-done
	if r.msg != "the moon is cheese: not within 10ms" {
		t.Fatalf("failure %q", r.msg)
	}
}

// recorder takes a Fatalf without ending the calling test.
type recorder struct {
	testing.TB
	msg string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
