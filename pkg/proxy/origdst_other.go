//go:build !linux

package proxy

import (
	"fmt"
	"net"
	"net/netip"
)

func originalDst(c net.Conn) (netip.AddrPort, error) {
	return netip.AddrPort{}, fmt.Errorf("%w: transparent mode needs Linux", ErrNoOriginalDst)
}
