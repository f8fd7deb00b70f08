package netjail

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"github.com/crackbox/crackbox/internal/testreq"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/jail"
)

// TestGuestLearnsOnlyItsGateway: guest root routes the host's other addresses (its LAN
// address, another run's gateway) straight onto its link and pokes each; the host must
// answer ARP for the guest's own gateway and for nothing else.
func TestGuestLearnsOnlyItsGateway(t *testing.T) {
	jailtest.Require(t)
	testreq.Check(t, Available(), "a tap and nftables", "run as root with /dev/net/tun and nft (scripts/deps.sh)")
	ctx := context.Background()
	runs := t.TempDir()
	mine, err := Setup(ctx, Config{RunID: "arp-a-" + strconv.Itoa(os.Getpid()), RunsDir: runs, Pool: testPool, UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	other, err := Setup(ctx, Config{RunID: "arp-b-" + strconv.Itoa(os.Getpid()), RunsDir: runs, Pool: testPool, UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tap, err := openTap(mine.Tap)
	if err != nil {
		t.Fatal(err)
	}
	defer tap.Close()

	// Every host address but the guest's gateway: the LAN address, the other run's
	// gateway, whatever else the host has.
	var targets []string
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.Equal(mine.Host.AsSlice()) {
			targets = append(targets, ipn.IP.String())
		}
	}
	if !slices.Contains(targets, other.Host.String()) {
		t.Fatalf("the other run's gateway %s is not among the host's addresses %v", other.Host, targets)
	}
	gw := mine.Host.String()
	// Non-blocking connects make the guest kernel ARP for each address; the loop then
	// reads the ARP table on the guest's clock alone (no sleeping), until the gateway is
	// resolved and one more second has passed for any other answer to arrive.
	script := fmt.Sprintf(`import socket, subprocess, time
for a in %[1]q.split():
    subprocess.run(["ip", "route", "add", a + "/32", "dev", "eth0"], check=True)
socks = []
for a in [%[2]q] + %[1]q.split():
    s = socket.socket()
    s.setblocking(False)
    s.connect_ex((a, 9))
    socks.append(s)
def table():
    return open("/proc/net/arp").read()
start, seen = time.monotonic(), None
while time.monotonic() - start < 20:
    if seen is None and any(l.split()[:1] == [%[2]q] and l.split()[2] == "0x2" for l in table().splitlines()[1:]):
        seen = time.monotonic()
    if seen is not None and time.monotonic() - seen > 1:
        break
print(table())`, strings.Join(targets, " "), gw)
	s := jailtest.Spec(t, "python3", "-c", script)
	s.Root = true
	s.Net = jail.Net{Mode: jail.NetTap, Tap: &jail.Tap{File: tap, GuestAddr: mine.GuestCIDR(), Gateway: gw}}
	var out, errb bytes.Buffer
	s.Stdout, s.Stderr = &out, &errb
	res, err := jailtest.Run(t, s)
	if err != nil || res.Exit != 0 {
		t.Fatalf("guest: exit %d err %v\nstderr: %s", res.Exit, err, errb.String())
	}
	arp := out.String()
	learned := map[string]bool{}
	sc := bufio.NewScanner(strings.NewReader(arp))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		// IP address, HW type, Flags (0x2: complete), HW address, Mask, Device
		if len(f) >= 4 && f[2] == "0x2" {
			learned[f[0]] = true
		}
	}
	if !learned[gw] {
		t.Errorf("the guest did not learn its gateway %s:\n%s\nstderr %s", gw, arp, errb.String())
	}
	for _, a := range targets {
		if learned[a] {
			t.Errorf("the host answered ARP for %s on the guest's tap:\n%s", a, arp)
		}
	}
}
