package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/crackbox/crackbox/internal/testreq"
)

// TestGuardRefusesOnLinkSubnet gives a fresh network namespace an interface on
// a public-looking /24 and resolves, from inside it, names that point at a
// neighbour on that subnet, at the namespace's own address and at an address
// one subnet over. Only the last passes unless allow_cidrs names the subnet.
func TestGuardRefusesOnLinkSubnet(t *testing.T) {
	testreq.Root(t, "creates a network namespace")
	own := netip.MustParseAddr("45.67.89.1")
	hosts := map[string][]netip.Addr{
		"neighbour.test": {netip.MustParseAddr("45.67.89.20")},
		"self.test":      {own},
		"far.test":       {netip.MustParseAddr("45.67.90.20")},
	}
	type result struct {
		name  string
		cidrs []netip.Prefix
		err   error
	}
	lan := netip.MustParsePrefix("45.67.89.0/24")
	cases := []result{
		{name: "neighbour.test"},
		{name: "self.test"},
		{name: "far.test"},
		{name: "neighbour.test", cidrs: []netip.Prefix{lan}},
		{name: "self.test", cidrs: []netip.Prefix{lan}},
	}
	errc := make(chan error, 1)
	go func() {
		// The thread stays in the namespace and dies with the goroutine.
		runtime.LockOSThread()
		errc <- inFreshNetns(func() error {
			// A veth pair whose both ends live and die in the namespace.
			link := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "cbxlan0"}, PeerName: "cbxlan1"}
			if err := netlink.LinkAdd(link); err != nil {
				return err
			}
			if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: own.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return err
			}
			for i := range cases {
				p, err := New(Options{Hosts: hosts, AllowCIDRs: cases[i].cidrs}, NewRegistry())
				if err != nil {
					return err
				}
				_, cases[i].err = p.Resolve(context.Background(), cases[i].name)
			}
			return nil
		})
	}()
	if err := <-errc; err != nil {
		testreq.Missing(t, "network namespaces", fmt.Sprintf("setting one up failed (%v): run as root on a kernel with CONFIG_NET_NS", err))
	}
	want := []bool{false, false, true, true, false}
	for i, c := range cases {
		if ok := c.err == nil; ok != want[i] {
			t.Errorf("resolve %s with allow_cidrs %v: err %v, want allowed=%v", c.name, c.cidrs, c.err, want[i])
		}
		if c.err != nil && !errors.Is(c.err, ErrPrivateAddress) {
			t.Errorf("resolve %s: %v, want ErrPrivateAddress", c.name, c.err)
		}
	}
}

// inFreshNetns moves the calling (locked) thread into a new, unnamed network
// namespace and runs fn there; the namespace goes away with the thread.
func inFreshNetns(fn func() error) error {
	ns, err := netns.New()
	if err != nil {
		return err
	}
	defer ns.Close()
	return fn()
}
