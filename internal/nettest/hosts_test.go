package nettest

import (
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// A simulated host reaches the bridge address over its veth, not once the
// link is down, and again when it is up; leftovers of a crashed run with the
// same names do not stop it, and at cleanup no namespace or link is left.
func TestHostsLinkAndCleanup(t *testing.T) {
	var ns, link string
	t.Run("hosts", func(t *testing.T) {
		crashed := NewHosts(t, 1)
		crashed.List = nil // as if the run died before its cleanup
		h := NewHosts(t, 2)
		ns, link = h.List[0].NS, h.List[0].Veth
		addr := Serve(Listen(t, net.JoinHostPort(h.Addr, "0")), func(c net.Conn) { c.Write([]byte("hi")); c.Close() })
		dial := func(x *Host) bool {
			host, port, _ := net.SplitHostPort(addr)
			out, err := x.Command("timeout", "3", "bash", "-c", "exec 3<>/dev/tcp/"+host+"/"+port+" && cat <&3").CombinedOutput()
			return err == nil && string(out) == "hi"
		}
		if !dial(h.List[0]) || !dial(h.List[1]) {
			t.Fatal("a host cannot reach the bridge address")
		}
		h.List[0].SetLink(t, false)
		if dial(h.List[0]) {
			t.Fatal("a host with its link down reached the bridge address")
		}
		if !dial(h.List[1]) {
			t.Fatal("cutting one host's link cut the other's")
		}
		h.List[0].SetLink(t, true)
		// The neighbour entry failed while the link was down; the next tries
		// resolve it again.
		eventually.True(t, 15*time.Second, "a host reaches the bridge address after its link came back",
			func() bool { return dial(h.List[0]) })
	})
	nss, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link").Output()
	if strings.Contains(string(nss), ns) || strings.Contains(string(links), link) {
		t.Fatalf("left behind: netns %s or link %s\n%s\n%s", ns, link, nss, links)
	}
}

// The namespaces and links of a test process that was killed before its
// cleanup ran are gone once the next run makes its hosts.
func TestHostsRemoveLeftoversOfKilledRun(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := dead.Process.Pid
	ns, bridge, veth := fmt.Sprintf("azf-%d-1", pid), fmt.Sprintf("azf%db", pid), fmt.Sprintf("azf%dh1", pid)
	t.Cleanup(func() {
		exec.Command("ip", "netns", "del", ns).Run()
		exec.Command("ip", "link", "del", bridge).Run()
		exec.Command("ip", "link", "del", veth).Run()
	})
	NewHosts(t, 1) // checks root and ip first
	ip(t, "netns", "add", ns)
	ip(t, "link", "add", bridge, "type", "bridge")
	ip(t, "link", "add", veth, "type", "veth", "peer", "name", fmt.Sprintf("azf%dg1", pid), "netns", ns)
	NewHosts(t, 1)
	nss, _ := exec.Command("ip", "netns", "list").Output()
	links, _ := exec.Command("ip", "-o", "link").Output()
	for _, name := range []string{ns, bridge + ":", veth + "@"} {
		if strings.Contains(string(nss)+string(links), name) {
			t.Errorf("%s of the killed run (pid %d) is still here:\n%s\n%s", strings.TrimRight(name, ":@"), pid, nss, links)
		}
	}
}
