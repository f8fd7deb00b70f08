package guest

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Reaper collects every child of PID 1, including orphans re-parented to it, and hands
// the status of a started command to whoever waits for it. It must be the only caller of
// wait in the process: a second waiter could steal the command's status.
type Reaper struct {
	mu      sync.Mutex
	waiting map[int]chan syscall.WaitStatus
}

// StartReaper begins reaping on SIGCHLD. Use it only in a process that owns all its
// children (PID 1); in a normal process it would steal other waiters' statuses.
func StartReaper() *Reaper {
	r := &Reaper{waiting: map[int]chan syscall.WaitStatus{}}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGCHLD)
	go func() {
		for range ch {
			r.reap()
		}
	}()
	return r
}

// start runs launch with the reaper locked, so a child that exits at once cannot be
// reaped before its pid is registered.
func (r *Reaper) start(launch func() (int, error)) (int, <-chan syscall.WaitStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	pid, err := launch()
	if err != nil {
		return 0, nil, err
	}
	ch := make(chan syscall.WaitStatus, 1)
	r.waiting[pid] = ch
	go r.reap() // in case SIGCHLD arrived while we held the lock and was coalesced
	return pid, ch, nil
}

func (r *Reaper) reap() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
		if ch, ok := r.waiting[pid]; ok && (ws.Exited() || ws.Signaled()) {
			ch <- ws
			delete(r.waiting, pid)
		}
	}
}
