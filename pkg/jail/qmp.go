package jail

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// monitor is the one QMP connection to a QEMU: go-qemu's socket monitor, with a timeout
// on every command (the go-qemu call itself has none).
type monitor struct{ m *qmp.SocketMonitor }

// dialQMP connects to QEMU's QMP socket, retrying until it appears or timeout passes.
// It gives up early when stop closes (QEMU exited).
func dialQMP(path string, timeout time.Duration, stop <-chan struct{}) (*monitor, error) {
	deadline := time.Now().Add(timeout)
	for {
		m, err := qmp.NewSocketMonitor("unix", path, time.Second)
		if err == nil {
			if err = m.Connect(); err == nil {
				return &monitor{m: m}, nil
			}
			m.Disconnect()
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("qmp %s: %w", path, err)
		}
		select {
		case <-stop:
			return nil, fmt.Errorf("qmp %s: qemu exited", path)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// qmpTimeout bounds one command where the caller has no tighter bound.
const qmpTimeout = 10 * time.Second

// do runs one command with its arguments (nil: none), passing fd along with it when set
// (SCM_RIGHTS, as getfd needs), and returns its "return" value.
func (m *monitor) do(cmd string, args any, fd *os.File, timeout time.Duration) (json.RawMessage, error) {
	b, err := json.Marshal(qmp.Command{Execute: cmd, Args: args})
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	type reply struct {
		out []byte
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		out, err := m.m.RunWithFile(b, fd)
		ch <- reply{out, err}
	}()
	var r reply
	select {
	case r = <-ch:
	case <-time.After(timeout):
		return nil, fmt.Errorf("qmp %s: %w", cmd, os.ErrDeadlineExceeded)
	}
	if r.err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, r.err)
	}
	var ret struct {
		Return json.RawMessage `json:"return"`
	}
	if err := json.Unmarshal(r.out, &ret); err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	return ret.Return, nil
}

// run executes one command without arguments.
func (m *monitor) run(cmd string, timeout time.Duration) (json.RawMessage, error) {
	return m.do(cmd, nil, nil, timeout)
}

// status returns the VM run state ("running", "paused", ...).
func (m *monitor) status(timeout time.Duration) (string, error) {
	out, err := m.run("query-status", timeout)
	if err != nil {
		return "", err
	}
	var r struct {
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", fmt.Errorf("qmp query-status: %w", err)
	}
	if r.Status == "" {
		return "", errors.New("qmp query-status: empty status")
	}
	return r.Status, nil
}

// waitMigrated polls query-migrate until the migration completed or failed.
func (m *monitor) waitMigrated(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := m.run("query-migrate", qmpTimeout)
		if err != nil {
			return err
		}
		var st struct {
			Status string `json:"status"`
			Error  string `json:"error-desc"`
		}
		if err := json.Unmarshal(out, &st); err != nil {
			return fmt.Errorf("qmp query-migrate: %w", err)
		}
		switch st.Status {
		case "completed":
			return nil
		case "failed", "cancelled":
			return fmt.Errorf("migration %s: %s", st.Status, st.Error)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("migration still %q after %s", st.Status, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// vcpuThreadIDs returns the host thread ids of the vCPUs (query-cpus-fast).
func (m *monitor) vcpuThreadIDs() ([]int, error) {
	out, err := m.run("query-cpus-fast", qmpTimeout)
	if err != nil {
		return nil, err
	}
	var cpus []struct {
		ThreadID int `json:"thread-id"`
	}
	if err := json.Unmarshal(out, &cpus); err != nil {
		return nil, fmt.Errorf("qmp query-cpus-fast: %w", err)
	}
	var ids []int
	for _, c := range cpus {
		ids = append(ids, c.ThreadID)
	}
	return ids, nil
}

func (m *monitor) quit(timeout time.Duration) error {
	_, err := m.run("quit", timeout)
	return err
}

func (m *monitor) close() {
	done := make(chan struct{})
	go func() { m.m.Disconnect(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Second):
	}
}
