package main

import (
	"fmt"
	"net"
	"os"

	"github.com/vishvananda/netlink"

	"github.com/crackbox/crackbox/pkg/jail/control"
)

func linkUp(name string) error {
	l, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("link %s: %w", name, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("link %s up: %w", name, err)
	}
	return nil
}

// configureNet sets up eth0 in tap mode: address, link up, default route via the host
// end of the tap. Other modes have loopback only.
func configureNet(n control.Net) error {
	if n.Mode != "tap" {
		return nil
	}
	addr, err := netlink.ParseAddr(n.Addr)
	if err != nil {
		return fmt.Errorf("net addr %q: want a CIDR like 10.77.0.2/30: %w", n.Addr, err)
	}
	gw := net.ParseIP(n.Gateway)
	if gw == nil {
		return fmt.Errorf("net gateway %q: want an IP address", n.Gateway)
	}
	l, err := netlink.LinkByName("eth0")
	if err != nil {
		return fmt.Errorf("tap mode but no eth0 in the guest: %w", err)
	}
	if err := netlink.AddrAdd(l, addr); err != nil {
		return fmt.Errorf("eth0 addr %s: %w", n.Addr, err)
	}
	if err := netlink.LinkSetUp(l); err != nil {
		return fmt.Errorf("eth0 up: %w", err)
	}
	if err := netlink.RouteAdd(&netlink.Route{LinkIndex: l.Attrs().Index, Gw: gw}); err != nil {
		return fmt.Errorf("default route via %s: %w", n.Gateway, err)
	}
	return nil
}

// writeResolvConf points the resolver at the host's DNS forwarder. The file may be a
// symlink into the host's /run (systemd-resolved), which does not exist here.
func writeResolvConf(dns string) error {
	if dns == "" {
		return nil
	}
	if net.ParseIP(dns) == nil {
		return fmt.Errorf("net dns %q: want an IP address", dns)
	}
	os.Remove("/etc/resolv.conf")
	if err := os.MkdirAll("/etc", 0o755); err != nil {
		return err
	}
	return os.WriteFile("/etc/resolv.conf", []byte("nameserver "+dns+"\n"), 0o644)
}
