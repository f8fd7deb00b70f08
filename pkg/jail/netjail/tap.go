package netjail

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// createTap makes a persistent single-queue tap owned by uid/gid (so QEMU can
// attach to it without privileges), records the owner tag in its alias,
// gives it the host side address of the /30 and brings it up. On error
// nothing is left behind.
func createTap(name string, host netip.Prefix, uid, gid int, tag string) (err error) {
	t := &netlink.Tuntap{
		LinkAttrs: netlink.LinkAttrs{Name: name},
		Mode:      netlink.TUNTAP_MODE_TAP,
		// TUN_EXCL fails instead of adopting a device that already has the name.
		Flags: netlink.TUNTAP_NO_PI | netlink.TUNTAP_TUN_EXCL | netlink.TUNTAP_VNET_HDR,
		Owner: idOrNone(uid),
		Group: idOrNone(gid),
	}
	if err := netlink.LinkAdd(t); err != nil {
		return fmt.Errorf("netjail: create tap %s: %w", name, err)
	}
	defer func() {
		if err != nil {
			_ = deleteLink(name)
		}
	}()
	link, err := netlink.LinkByName(name)
	if err != nil {
		return fmt.Errorf("netjail: find tap %s: %w", name, err)
	}
	if err := netlink.LinkSetAlias(link, tag); err != nil {
		return fmt.Errorf("netjail: tag tap %s: %w", name, err)
	}
	disableIPv6(name)
	if err := quietARP(name); err != nil {
		return err
	}
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: host.Addr().AsSlice(), Mask: net.CIDRMask(host.Bits(), 32)}}
	if err := netlink.AddrAdd(link, addr); err != nil {
		return fmt.Errorf("netjail: address %s on tap %s: %w", host, name, err)
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("netjail: bring up tap %s: %w", name, err)
	}
	return nil
}

// idOrNone maps "no owner" to root: the kernel refuses an invalid owner id,
// and root can attach anyway.
func idOrNone(id int) uint32 {
	if id < 0 {
		return 0
	}
	return uint32(id)
}

// disableIPv6 keeps the host side of a jail link free of IPv6 addresses
// (link-local included); the nft table drops IPv6 regardless, so a host
// without IPv6 support is not an error.
func disableIPv6(name string) {
	_ = os.WriteFile("/proc/sys/net/ipv6/conf/"+name+"/disable_ipv6", []byte("1"), 0o644)
}

// tapARP are the per-tap ARP settings: answer only for the tap's own address and only
// to a sender on the tap's subnet (arp_ignore=2), pick which answers by route as well
// (arp_filter), announce only the tap's address (arp_announce=2) and never answer for
// other hosts (proxy_arp). Linux otherwise answers on every interface for all of the
// host's addresses, so a guest could map the LAN address and other runs' gateways.
var tapARP = [][2]string{{"arp_ignore", "2"}, {"arp_filter", "1"}, {"arp_announce", "2"}, {"proxy_arp", "0"}}

// quietARP applies tapARP to the tap before it comes up; a failure is an error, since
// the guest would otherwise learn the host's addresses.
func quietARP(name string) error {
	for _, kv := range tapARP {
		p := "/proc/sys/net/ipv4/conf/" + name + "/" + kv[0]
		if err := os.WriteFile(p, []byte(kv[1]), 0o644); err != nil {
			return fmt.Errorf("netjail: %s on tap %s: %w", kv[0], name, err)
		}
	}
	return nil
}

// deleteLink removes the named link; a missing link is not an error.
func deleteLink(name string) error {
	if name == "" {
		return nil
	}
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("netjail: find link %s: %w", name, err)
	}
	if err := netlink.LinkDel(link); err != nil {
		return fmt.Errorf("netjail: delete link %s: %w", name, err)
	}
	return nil
}

// openTap attaches to an existing tap and returns its queue for QEMU to
// inherit (-netdev tap,fd=N), so QEMU needs neither privilege nor ownership
// of the device. The flags must match the device: single queue, no packet
// info, virtio-net header.
func openTap(name string) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("netjail: open /dev/net/tun: %w", err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netjail: tap %s: %w", name, err)
	}
	ifr.SetUint16(unix.IFF_TAP | unix.IFF_NO_PI | unix.IFF_VNET_HDR)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("netjail: attach to tap %s: %w", name, err)
	}
	return os.NewFile(uintptr(fd), "/dev/net/tun@"+name), nil
}
