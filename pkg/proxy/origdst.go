package proxy

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// ErrNoOriginalDst is wrapped when a connection carries no NAT destination.
var ErrNoOriginalDst = errors.New("no original destination")

// Address families as the Linux kernel numbers them in a sockaddr.
const (
	afInet  = 2
	afInet6 = 10
)

// parseSockaddr decodes the struct sockaddr_in / sockaddr_in6 that
// SO_ORIGINAL_DST fills in. The family is in host byte order, port and
// address in network order.
func parseSockaddr(b []byte) (netip.AddrPort, error) {
	if len(b) < 2 {
		return netip.AddrPort{}, fmt.Errorf("%w: sockaddr of %d bytes", ErrNoOriginalDst, len(b))
	}
	fam := binary.NativeEndian.Uint16(b[:2])
	switch fam {
	case afInet:
		if len(b) < 8 {
			return netip.AddrPort{}, fmt.Errorf("%w: short sockaddr_in", ErrNoOriginalDst)
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), port), nil
	case afInet6:
		if len(b) < 24 {
			return netip.AddrPort{}, fmt.Errorf("%w: short sockaddr_in6", ErrNoOriginalDst)
		}
		port := binary.BigEndian.Uint16(b[2:4])
		return netip.AddrPortFrom(netip.AddrFrom16([16]byte(b[8:24])).Unmap(), port), nil
	}
	return netip.AddrPort{}, fmt.Errorf("%w: address family %d", ErrNoOriginalDst, fam)
}
