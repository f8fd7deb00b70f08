package jail

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// fakeVCPU runs a thread of this process named like QEMU's vCPU thread. It spins until
// spin is closed, then sleeps until stop is closed, then ends. It returns when the
// thread carries the name.
func fakeVCPU(t *testing.T, spin, stop <-chan struct{}, spinEnd *atomic.Int64) {
	t.Helper()
	named := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		name, _ := unix.BytePtrFromString("CPU 0/TCG")
		named <- unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(name)), 0, 0, 0)
		x := 0
		for {
			select {
			case <-spin:
				spinEnd.Store(time.Now().UnixNano())
				<-stop
				// The thread may be the main one, which Go keeps: drop the name.
				other, _ := unix.BytePtrFromString("fake-vcpu-done")
				unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(other)), 0, 0, 0)
				return
			default:
				for i := 0; i < 1000; i++ {
					x += i
				}
			}
		}
	}()
	if err := <-named; err != nil {
		t.Fatal(err)
	}
}

// waitNoVCPU waits until the fake vCPU thread has gone.
func waitNoVCPU(t *testing.T) {
	for i := 0; len(vcpuThreads(os.Getpid())) > 0; i++ {
		if i > 500 {
			t.Fatal("fake vcpu thread still there")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWaitVCPUsIdle: the wait ends only after the vCPU thread stopped running, never
// while it runs, and says when it cannot watch.
func TestWaitVCPUsIdle(t *testing.T) {
	ctx := context.Background()

	// Busy throughout: no idle within the timeout.
	spin, stop := make(chan struct{}), make(chan struct{})
	var spinEnd atomic.Int64
	fakeVCPU(t, spin, stop, &spinEnd)
	idle, err := waitVCPUsIdle(ctx, os.Getpid(), 300*time.Millisecond)
	close(spin)
	close(stop)
	if idle || err != nil {
		t.Fatalf("a spinning vcpu: idle %v, err %v; want not idle", idle, err)
	}
	waitNoVCPU(t)

	// Busy, then halted: idle, and only after the spinning ended.
	spin, stop = make(chan struct{}), make(chan struct{})
	defer close(stop)
	fakeVCPU(t, spin, stop, &spinEnd)
	time.AfterFunc(200*time.Millisecond, func() { close(spin) })
	idle, err = waitVCPUsIdle(ctx, os.Getpid(), time.Minute)
	done := time.Now().UnixNano()
	if !idle || err != nil {
		t.Fatalf("a vcpu that halts: idle %v, err %v; want idle", idle, err)
	}
	if end := spinEnd.Load(); end == 0 || done < end {
		t.Fatalf("idle reported before the vcpu stopped spinning (spin end %d, returned %d)", end, done)
	}

	// A process without vCPU threads cannot be watched.
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	if _, err := waitVCPUsIdle(ctx, cmd.Process.Pid, time.Second); !errors.Is(err, errNoVCPUThreads) {
		t.Fatalf("no vcpu threads: err %v, want errNoVCPUThreads", err)
	}
}
