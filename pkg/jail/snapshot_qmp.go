package jail

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// rawQMP is a minimal QMP client for making snapshots. It exists because getfd needs
// the file descriptor sent with the command (SCM_RIGHTS), which go-qemu's monitor
// cannot do.
type rawQMP struct {
	c *net.UnixConn
	r *bufio.Reader
}

func dialRawQMP(path string, timeout time.Duration, stop <-chan struct{}) (*rawQMP, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
		if err == nil {
			q := &rawQMP{c: c, r: bufio.NewReader(c)}
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			if _, err = q.r.ReadBytes('\n'); err == nil { // the greeting
				if _, err = q.do("qmp_capabilities", nil, nil); err == nil {
					return q, nil
				}
			}
			c.Close()
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

// do runs one command, passing fd along when set, and returns its "return" value.
func (q *rawQMP) do(cmd string, args map[string]any, fd *os.File) (json.RawMessage, error) {
	req := map[string]any{"execute": cmd}
	if args != nil {
		req["arguments"] = args
	}
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	b = append(b, '\n')
	_ = q.c.SetDeadline(time.Now().Add(10 * time.Second))
	if fd != nil {
		_, _, err = q.c.WriteMsgUnix(b, unix.UnixRights(int(fd.Fd())), nil)
	} else {
		_, err = q.c.Write(b)
	}
	if err != nil {
		return nil, fmt.Errorf("qmp %s: %w", cmd, err)
	}
	for {
		line, err := q.r.ReadBytes('\n')
		if err != nil {
			if cmd == "quit" && len(line) == 0 {
				return nil, nil
			}
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		var r struct {
			Return json.RawMessage `json:"return"`
			Error  *struct {
				Class string `json:"class"`
				Desc  string `json:"desc"`
			} `json:"error"`
			Event string `json:"event"`
		}
		if err := json.Unmarshal(line, &r); err != nil {
			return nil, fmt.Errorf("qmp %s: %w", cmd, err)
		}
		switch {
		case r.Event != "":
			continue
		case r.Error != nil:
			return nil, fmt.Errorf("qmp %s: %s: %s", cmd, r.Error.Class, r.Error.Desc)
		default:
			return r.Return, nil
		}
	}
}

// waitMigrated polls query-migrate until the migration completed or failed.
func (q *rawQMP) waitMigrated(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		out, err := q.do("query-migrate", nil, nil)
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
func (q *rawQMP) vcpuThreadIDs() ([]int, error) {
	out, err := q.do("query-cpus-fast", nil, nil)
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

func (q *rawQMP) close() {
	if q != nil && q.c != nil {
		q.c.Close()
	}
}
