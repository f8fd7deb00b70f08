//go:build linux

package proxy

import (
	"fmt"
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// soOriginalDst is SO_ORIGINAL_DST (and IP6T_SO_ORIGINAL_DST) from
// linux/netfilter_ipv4.h: the pre-NAT destination of a redirected socket.
const soOriginalDst = 80

// originalDst returns the destination the client dialed before an nftables
// redirect/dnat rule sent it to us.
func originalDst(c net.Conn) (netip.AddrPort, error) {
	tc, ok := unwrap(c).(*net.TCPConn)
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("%w: %T is not a TCP connection", ErrNoOriginalDst, c)
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return netip.AddrPort{}, err
	}
	level := unix.SOL_IP
	if la, ok := tc.LocalAddr().(*net.TCPAddr); ok && la.IP.To4() == nil {
		level = unix.SOL_IPV6
	}
	var buf [128]byte
	size := uint32(len(buf))
	var errno unix.Errno
	cerr := raw.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, uintptr(level), soOriginalDst,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
	})
	if cerr != nil {
		return netip.AddrPort{}, cerr
	}
	if errno != 0 {
		return netip.AddrPort{}, fmt.Errorf("%w: getsockopt SO_ORIGINAL_DST: %w", ErrNoOriginalDst, errno)
	}
	return parseSockaddr(buf[:size])
}
