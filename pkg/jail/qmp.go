package jail

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// monitor is a QMP connection to one QEMU.
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

// run executes one QMP command, giving up after timeout (the go-qemu call itself has none).
func (m *monitor) run(cmd string, timeout time.Duration) ([]byte, error) {
	b, _ := json.Marshal(qmp.Command{Execute: cmd})
	type reply struct {
		out []byte
		err error
	}
	ch := make(chan reply, 1)
	go func() {
		out, err := m.m.Run(b)
		ch <- reply{out, err}
	}()
	select {
	case r := <-ch:
		return r.out, r.err
	case <-time.After(timeout):
		return nil, fmt.Errorf("qmp %s: %w", cmd, os.ErrDeadlineExceeded)
	}
}

// status returns the VM run state ("running", "paused", ...).
func (m *monitor) status(timeout time.Duration) (string, error) {
	out, err := m.run("query-status", timeout)
	if err != nil {
		return "", err
	}
	var r struct {
		Return struct {
			Status string `json:"status"`
		} `json:"return"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		return "", err
	}
	if r.Return.Status == "" {
		return "", errors.New("qmp query-status: empty status")
	}
	return r.Return.Status, nil
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
