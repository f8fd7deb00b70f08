package proc

import (
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Tie makes cmd a child that dies with this process, by sig, and leads a process group
// of its own so KillGroup also ends what it started. Other SysProcAttr fields are kept.
// The parent-death signal fires when the thread that forked ends, not the process: a
// caller whose goroutine may not hold its thread until cmd exits starts it with Spawn.
func Tie(cmd *exec.Cmd, sig syscall.Signal) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = sig
	cmd.SysProcAttr.Setpgid = true
}

// KillGroup sends SIGKILL to the process group cmd leads (Tie made it the leader).
func KillGroup(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
}

// Spawn starts cmd from a goroutine locked to its thread and reaps it there, so the
// parent-death signal Tie set fires only when this process dies. The returned channel
// closes once cmd has been waited for.
func Spawn(cmd *exec.Cmd) (exited <-chan struct{}, err error) {
	done, started := make(chan struct{}), make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer close(done)
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		_ = cmd.Wait()
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	return done, nil
}

// Stop gives cmd grace to exit by itself (exited closes when it has been waited for),
// then kills its process group and waits. It says whether it had to kill.
func Stop(cmd *exec.Cmd, exited <-chan struct{}, grace time.Duration) (killed bool) {
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-exited:
		return false
	case <-t.C:
		_ = KillGroup(cmd)
		<-exited
		return true
	}
}
