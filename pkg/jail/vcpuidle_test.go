package jail

import (
	"context"
	"errors"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// fakeVCPU runs a thread of this process standing in for a QEMU vCPU thread: it spins
// until spin is closed, then sleeps until stop is closed. It returns the thread's id.
func fakeVCPU(spin, stop <-chan struct{}, spinEnd *atomic.Int64) int {
	tid := make(chan int, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		tid <- unix.Gettid()
		x := 0
		for {
			select {
			case <-spin:
				spinEnd.Store(time.Now().UnixNano())
				<-stop
				return
			default:
				for i := 0; i < 1000; i++ {
					x += i
				}
			}
		}
	}()
	return <-tid
}

// TestWaitVCPUsIdle: the wait ends only after the vCPU thread stopped running, never
// while it runs, and says when it cannot watch.
func TestWaitVCPUsIdle(t *testing.T) {
	ctx := context.Background()
	pid := os.Getpid()

	// Busy throughout: no idle within the timeout.
	spin, stop := make(chan struct{}), make(chan struct{})
	var spinEnd atomic.Int64
	tid := fakeVCPU(spin, stop, &spinEnd)
	idle, err := waitVCPUsIdle(ctx, pid, []int{tid}, 300*time.Millisecond)
	close(spin)
	close(stop)
	if idle || err != nil {
		t.Fatalf("a spinning vcpu: idle %v, err %v; want not idle", idle, err)
	}

	// Busy, then halted: idle, and only after the spinning ended.
	spin, stop = make(chan struct{}), make(chan struct{})
	defer close(stop)
	spinEnd.Store(0)
	tid = fakeVCPU(spin, stop, &spinEnd)
	time.AfterFunc(200*time.Millisecond, func() { close(spin) })
	idle, err = waitVCPUsIdle(ctx, pid, []int{tid}, time.Minute)
	done := time.Now().UnixNano()
	if !idle || err != nil {
		t.Fatalf("a vcpu that halts: idle %v, err %v; want idle", idle, err)
	}
	if end := spinEnd.Load(); end == 0 || done < end {
		t.Fatalf("idle reported before the vcpu stopped spinning (spin end %d, returned %d)", end, done)
	}

	// Thread ids this process cannot see (another pid namespace) cannot be watched.
	for _, tids := range [][]int{nil, {1 << 30}} {
		if _, err := waitVCPUsIdle(ctx, pid, tids, time.Second); !errors.Is(err, errNoVCPUThreads) {
			t.Fatalf("tids %v: err %v, want errNoVCPUThreads", tids, err)
		}
	}
}
