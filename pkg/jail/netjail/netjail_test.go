package netjail

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/vishvananda/netlink"
)

func testRunID(t *testing.T) string {
	return fmt.Sprintf("test-%d-%s", os.Getpid(), t.Name()[len(t.Name())-min(8, len(t.Name())):])
}

func TestSetupBuildsTapAndTableAndCloseRemovesThem(t *testing.T) {
	requireNetAdmin(t)
	runsDir := t.TempDir()
	n, err := Setup(context.Background(), Config{Pool: testPool, RunID: testRunID(t), RunsDir: runsDir, UID: 65534, GID: 65534})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })

	if n.Subnet.Bits() != 30 || !testPool.Contains(n.Subnet.Addr()) {
		t.Fatalf("subnet %s not a /30 of %s", n.Subnet, testPool)
	}
	if n.Host != n.Subnet.Addr().Next() || n.Guest != n.Host.Next() {
		t.Fatalf("host %s guest %s in %s: want .1 and .2", n.Host, n.Guest, n.Subnet)
	}

	link, err := netlink.LinkByName(n.Tap)
	if err != nil {
		t.Fatalf("tap %s: %v", n.Tap, err)
	}
	tap, ok := link.(*netlink.Tuntap)
	if !ok {
		t.Fatalf("link %s is %T, want *netlink.Tuntap", n.Tap, link)
	}
	if tap.Mode != netlink.TUNTAP_MODE_TAP || tap.Owner != 65534 || tap.Group != 65534 || tap.NonPersist {
		t.Errorf("tap mode=%v owner=%d group=%d nonpersist=%v; want tap, 65534, 65534, persistent", tap.Mode, tap.Owner, tap.Group, tap.NonPersist)
	}
	if tap.Flags&netlink.TUNTAP_MULTI_QUEUE != 0 {
		t.Errorf("tap %s is multi-queue", n.Tap)
	}
	if o, ok := parseTag(tap.Attrs().Alias); !ok || o.PID != os.Getpid() || o.RunID != n.RunID {
		t.Errorf("tap alias %q does not name this run and process", tap.Attrs().Alias)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 1 || addrs[0].IPNet.String() != netip.PrefixFrom(n.Host, 30).String() {
		t.Errorf("tap addresses %v, want only %s/30 (no IPv6)", addrs, n.Host)
	}

	tap1, g := n.Tap, n.Guest.String()
	h := n.Host.String()
	wantRules(t, n.Table, chainPrerouting, []string{
		"iif=" + tap1 + " ipv4 tcp dport==80 to=" + h + " port=3129 dnat",
		"iif=" + tap1 + " ipv4 tcp dport==443 to=" + h + " port=3129 dnat",
	})
	wantRules(t, n.Table, chainInput, []string{"iif=" + tap1 + " jump:guest_in"})
	wantRules(t, n.Table, chainGuestIn, []string{
		"ipv6 counter drop #" + DropIPv6,
		"saddr!=" + g + " counter drop #" + DropSpoof,
		"daddr!=" + h + " counter drop #" + DropNotHost,
		"tcp dport==3128 accept",
		"tcp dport==3129 ct-status&0x20 accept",
		"udp dport==53 accept",
		"tcp dport==53 accept",
		"icmp icmptype==8 accept",
		"icmp ct-state&0x4 accept",
		"counter drop #" + DropOther,
	})
	wantRules(t, n.Table, chainForward, []string{
		"iif=" + tap1 + " counter drop #" + DropForward,
		"oif=" + tap1 + " counter drop #" + DropToGuest,
	})
	wantRules(t, n.Table, chainOutput, []string{"oif=" + tap1 + " jump:guest_out"})
	wantRules(t, n.Table, chainGuestOut, []string{"ct-state&0x6 accept", "counter drop #" + DropOutput})

	claims, _ := filepath.Glob(filepath.Join(runsDir, claimDirName, "*.claim"))
	if len(claims) != 1 {
		t.Errorf("claims %v, want one", claims)
	}

	if err := n.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := n.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	if _, err := netlink.LinkByName(n.Tap); err == nil {
		t.Errorf("tap %s still exists after Close", n.Tap)
	}
	if tableExists(t, n.Table) {
		t.Errorf("table %s still exists after Close", n.Table)
	}
	claims, _ = filepath.Glob(filepath.Join(runsDir, claimDirName, "*.claim"))
	if len(claims) != 0 {
		t.Errorf("claims left after Close: %v", claims)
	}
}

func TestTwoRunsGetDistinctSubnets(t *testing.T) {
	requireNetAdmin(t)
	runsDir := t.TempDir()
	a, err := Setup(context.Background(), Config{Pool: testPool, RunID: testRunID(t) + "-a", RunsDir: runsDir, UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	// A second runs dir does not see a's claim; the host route of a's tap
	// must keep b off its /30 anyway.
	b, err := Setup(context.Background(), Config{Pool: testPool, RunID: testRunID(t) + "-b", RunsDir: t.TempDir(), UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if a.Subnet.Overlaps(b.Subnet) {
		t.Fatalf("runs share %s and %s", a.Subnet, b.Subnet)
	}
}

// deadOwner returns an owner whose process has exited.
func deadOwner(t *testing.T, runID string) owner {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return owner{RunID: runID, PID: cmd.Process.Pid, Start: 1}
}

func TestGCRemovesDeadRunsAndKeepsLiveOnes(t *testing.T) {
	requireNetAdmin(t)
	runsDir := t.TempDir()
	live, err := Setup(context.Background(), Config{Pool: testPool, RunID: testRunID(t) + "-live", RunsDir: runsDir, UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Close() })

	// A run that was SIGKILLed: claim, tap and table remain, owner is gone.
	deadID := testRunID(t) + "-dead"
	dead := deadOwner(t, deadID)
	busy, err := hostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	c, err := claimSubnet(runsDir, testPool, busy, record{owner: dead, Tap: TapName(deadID), Table: TableName(deadID)})
	if err != nil {
		t.Fatal(err)
	}
	c.f.Close() // the dead process's lock went with it
	host := c.subnet.Addr().Next()
	t.Cleanup(func() { removeObjects(TapName(deadID), TableName(deadID)); os.Remove(c.path) })
	if err := createTap(TapName(deadID), netip.PrefixFrom(host, 30), -1, -1, dead.tag()); err != nil {
		t.Fatal(err)
	}
	if err := (Rules{Table: TableName(deadID), Iface: TapName(deadID), Host: host, Guest: host.Next(),
		ProxyPort: 3128, DNSPort: 53, Listen: Listeners{Transparent: 3129}, Owner: dead.tag()}).Install(); err != nil {
		t.Fatal(err)
	}
	// An orphan tap of a dead run with no claim anywhere, found by its tag alone.
	orphanID := testRunID(t) + "-orphan"
	orphan := deadOwner(t, orphanID)
	t.Cleanup(func() { deleteLink(TapName(orphanID)) })
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: TapName(orphanID), Alias: orphan.tag()}, Mode: netlink.TUNTAP_MODE_TAP}); err != nil {
		t.Fatal(err)
	}
	if l, err := netlink.LinkByName(TapName(orphanID)); err == nil {
		netlink.LinkSetAlias(l, orphan.tag())
	}
	// A cbx-named tap that is not ours (no tag) must survive.
	foreign := "cbxforeign" + fmt.Sprint(os.Getpid()%1000)
	t.Cleanup(func() { deleteLink(foreign) })
	if err := netlink.LinkAdd(&netlink.Tuntap{LinkAttrs: netlink.LinkAttrs{Name: foreign}, Mode: netlink.TUNTAP_MODE_TAP}); err != nil {
		t.Fatal(err)
	}

	removed, err := GC(runsDir)
	if err != nil {
		t.Fatalf("gc: %v", err)
	}
	t.Logf("gc removed %v", removed)
	for _, gone := range []string{TapName(deadID), TapName(orphanID)} {
		if _, err := netlink.LinkByName(gone); err == nil {
			t.Errorf("dead run's tap %s survived GC", gone)
		}
	}
	if tableExists(t, TableName(deadID)) {
		t.Errorf("dead run's table survived GC")
	}
	if _, err := os.Stat(c.path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("dead run's claim survived GC: %v", err)
	}
	for _, kept := range []string{live.Tap, foreign} {
		if _, err := netlink.LinkByName(kept); err != nil {
			t.Errorf("GC removed %s: %v", kept, err)
		}
	}
	if !tableExists(t, live.Table) {
		t.Errorf("GC removed the live run's table")
	}
	if _, err := os.Stat(live.claim.path); err != nil {
		t.Errorf("GC removed the live run's claim: %v", err)
	}
}
