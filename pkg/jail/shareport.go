package jail

import (
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

// sharePortCount is how many virtio-serial ports every guest has for stream shares. A
// share on a port of its own reaches the guest kernel's 9p client through one plain
// relay in guest-init, where a stream of the control session also crosses yamux and
// its goroutines, which under TCG cost several times the round trip itself. The count
// is fixed so that a snapshot's devices fit every run; shares past it use the control
// session.
const sharePortCount = 6

// sharePortName is the virtio-serial name (and QEMU chardev id) of share port i.
func sharePortName(i int) string { return "sh" + strconv.Itoa(i) }

// sharePortSocks are the sockets QEMU listens on for the share ports in rd.
func sharePortSocks(rd *runDir) []string {
	out := make([]string, sharePortCount)
	for i := range out {
		out[i] = rd.vmPath(sharePortName(i) + ".sock")
	}
	return out
}

// assignSharePorts gives the plan's stream shares a port each, lowers first, in order,
// until the ports run out, and records in p.portTags which share each port carries.
// The host alone makes this choice: whatever the guest opens, a port serves its share.
func assignSharePorts(p *plan) {
	p.portTags = nil
	assign := func(ms []control.Mount) {
		for i := range ms {
			if ms[i].FSType != FSStream || len(p.portTags) == sharePortCount {
				continue
			}
			ms[i].Port = sharePortName(len(p.portTags))
			p.portTags = append(p.portTags, ms[i].Tag)
		}
	}
	assign(p.rs.Root.Lower)
	assign(p.rs.Mounts)
}

// connectSharePorts connects the host to each share port the plan uses and hands the
// connection to its share's server. QEMU listens on the ports from its start, so a
// failure here means QEMU is gone; the guest then sees its mount fail.
func connectSharePorts(p *plan, rd *runDir, shares *streamShares, exited <-chan struct{}) error {
	for i, tag := range p.portTags {
		c, err := dialPort(rd.vmPath(sharePortName(i)+".sock"), 10*time.Second, exited)
		if err != nil {
			return fmt.Errorf("share %q: %w", tag, err)
		}
		go shares.serve(tag, c)
	}
	return nil
}

// dialPort connects to a socket QEMU listens on, retrying until timeout while QEMU
// starts up.
func dialPort(path string, timeout time.Duration, stop <-chan struct{}) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			return c, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("share port %s: %w", path, err)
		}
		select {
		case <-stop:
			return nil, fmt.Errorf("share port %s: qemu exited", path)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
