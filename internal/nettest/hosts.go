package nettest

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
)

// Hosts are simulated machines: one network namespace each, joined by a veth
// pair to a bridge in the root namespace. The bridge carries Addr, where the
// test's servers listen; a host reaches Addr (and the other hosts) over its
// veth only, and nothing else, since its namespace has no default route.
// Every address is in 10.213.N.0/24 with N unused on this machine, and every
// name carries the test process's pid, so concurrent runs do not collide.
type Hosts struct {
	Addr   string // the bridge's address in the root namespace
	List   []*Host
	bridge string
}

// Host is one simulated machine.
type Host struct {
	NS   string // its network namespace
	Veth string // the root-namespace end of its link
	Addr string // its own address, inside NS
}

// NewHosts makes n hosts (n ≤ 9) and removes them, and the bridge, when the
// test ends, failed or not. Leftovers of a crashed run of the same pid, and of
// test processes that are gone, are removed first.
func NewHosts(t testing.TB, n int) *Hosts {
	t.Helper()
	testreq.Root(t, "network namespaces and veth pairs for simulated hosts")
	testreq.Command(t, "ip", "iproute2")
	if n < 1 || n > 9 {
		t.Fatalf("nettest: %d hosts; want 1 to 9", n)
	}
	pid := os.Getpid()
	h := &Hosts{bridge: fmt.Sprintf("azf%db", pid)}
	for i := 1; i <= n; i++ {
		h.List = append(h.List, &Host{NS: fmt.Sprintf("azf-%d-%d", pid, i), Veth: fmt.Sprintf("azf%dh%d", pid, i)})
	}
	removeOrphans()
	h.remove()
	t.Cleanup(h.remove)
	net := freeNet(t, pid)
	h.Addr = fmt.Sprintf("10.213.%d.1", net)
	ip(t, "link", "add", h.bridge, "type", "bridge")
	ip(t, "addr", "add", h.Addr+"/24", "dev", h.bridge)
	ip(t, "link", "set", h.bridge, "up")
	for i, x := range h.List {
		peer := fmt.Sprintf("azf%dg%d", pid, i+1)
		x.Addr = fmt.Sprintf("10.213.%d.%d", net, 10+i+1)
		ip(t, "netns", "add", x.NS)
		ip(t, "link", "add", x.Veth, "type", "veth", "peer", "name", peer, "netns", x.NS)
		ip(t, "link", "set", x.Veth, "master", h.bridge, "up")
		ip(t, "-n", x.NS, "addr", "add", x.Addr+"/24", "dev", peer)
		ip(t, "-n", x.NS, "link", "set", peer, "up")
		ip(t, "-n", x.NS, "link", "set", "lo", "up")
	}
	return h
}

// Command runs name inside the host's namespace; the process is name itself
// (ip netns exec execs it), so signals reach it directly.
func (x *Host) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", x.NS, name}, args...)...)
}

// SetLink takes the host's link down (cut off from the bridge) or up again.
func (x *Host) SetLink(t testing.TB, up bool) {
	t.Helper()
	state := "down"
	if up {
		state = "up"
	}
	ip(t, "link", "set", x.Veth, state)
}

// remove deletes every namespace and link of h; deleting a namespace
// deletes the veth pair whose end is inside it.
func (h *Hosts) remove() {
	for _, x := range h.List {
		exec.Command("ip", "netns", "del", x.NS).Run()
		exec.Command("ip", "link", "del", x.Veth).Run()
	}
	exec.Command("ip", "link", "del", h.bridge).Run()
}

var (
	orphanNS   = regexp.MustCompile(`^azf-(\d+)-\d+$`)
	orphanLink = regexp.MustCompile(`^azf(\d+)(b|h\d+)$`)
)

// removeOrphans deletes the namespaces and links of test processes that no
// longer run: one killed before its cleanup leaves them, and the next run
// on the machine should not find them.
func removeOrphans() {
	gone := func(pid string) bool {
		n, err := strconv.Atoi(pid)
		return err == nil && n > 0 && syscall.Kill(n, 0) == syscall.ESRCH
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			if m := orphanNS.FindStringSubmatch(f[0]); m != nil && gone(m[1]) {
				exec.Command("ip", "netns", "del", f[0]).Run()
			}
		}
	}
	out, _ = exec.Command("ip", "-o", "link").Output()
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		name, _, _ := strings.Cut(strings.TrimSuffix(f[1], ":"), "@")
		if m := orphanLink.FindStringSubmatch(name); m != nil && gone(m[1]) {
			exec.Command("ip", "link", "del", name).Run()
		}
	}
}

// freeNet picks N for 10.213.N.0/24 that no address or route on this machine
// uses, starting from the pid so concurrent runs start apart.
func freeNet(t testing.TB, pid int) int {
	t.Helper()
	addrs, err := exec.Command("ip", "-o", "-4", "addr").Output()
	if err != nil {
		t.Fatalf("nettest: ip addr: %v", err)
	}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		t.Fatalf("nettest: ip route: %v", err)
	}
	used := string(addrs) + string(routes)
	for k := 0; k < 250; k++ {
		n := (pid+k)%250 + 1
		if !strings.Contains(used, fmt.Sprintf("10.213.%d.", n)) {
			return n
		}
	}
	t.Fatal("nettest: every 10.213.N.0/24 is in use")
	return 0
}

func ip(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("nettest: ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}
