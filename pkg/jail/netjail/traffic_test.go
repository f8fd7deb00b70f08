package netjail

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// guestNS is a network namespace standing in for a guest: a veth pair whose
// host end carries the jail's rules (a tap without a reader passes nothing).
type guestNS struct {
	ns          netns.NsHandle
	hostIf      string
	host, guest netip.Addr
}

// inNS runs fn with the calling goroutine's thread in ns. Sockets created in
// fn stay in ns after it returns.
func (g *guestNS) inNS(t *testing.T, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer orig.Close()
	if err := netns.Set(g.ns); err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	defer func() {
		// A thread stuck in the wrong namespace must die with the goroutine.
		if netns.Set(orig) == nil {
			runtime.UnlockOSThread()
		}
	}()
	fn()
}

var nsSeq atomic.Int32

func newGuestNS(t *testing.T) *guestNS {
	t.Helper()
	busy, err := hostPrefixes()
	if err != nil {
		t.Fatal(err)
	}
	c, err := claimSubnet(t.TempDir(), testPool, busy, record{owner: owner{PID: os.Getpid()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.release() })
	g := &guestNS{host: c.subnet.Addr().Next()}
	g.guest = g.host.Next()

	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatal(err)
	}
	g.ns, err = netns.New()
	if err == nil {
		err = netns.Set(orig)
		if err == nil {
			runtime.UnlockOSThread()
		}
	} else {
		runtime.UnlockOSThread()
	}
	orig.Close()
	if err != nil {
		t.Fatalf("netns: %v", err)
	}
	// Closing the last handle destroys the namespace and with it both veth ends.
	t.Cleanup(func() { g.ns.Close() })

	suffix := fmt.Sprintf("%x%d", os.Getpid()%0xffff, nsSeq.Add(1))
	g.hostIf = "cbxvh" + suffix
	peer := "cbxvg" + suffix
	t.Cleanup(func() { deleteLink(g.hostIf) })
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: g.hostIf}, PeerName: peer}); err != nil {
		t.Fatalf("veth: %v", err)
	}
	hl, err := netlink.LinkByName(g.hostIf)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := netlink.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(pl, int(g.ns)); err != nil {
		t.Fatal(err)
	}
	disableIPv6(g.hostIf)
	// Whatever the host's global setting, only tests that route between
	// their own namespaces turn forwarding on, so a rule that failed can
	// never send a test packet off the machine.
	setForwarding(t, g.hostIf, false)
	must(t, netlink.AddrAdd(hl, addr(g.host)))
	must(t, netlink.LinkSetUp(hl))

	h, err := netlink.NewHandleAt(g.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	pl, err = h.LinkByName(peer)
	if err != nil {
		t.Fatal(err)
	}
	lo, err := h.LinkByName("lo")
	if err != nil {
		t.Fatal(err)
	}
	must(t, h.AddrAdd(pl, addr(g.guest)))
	must(t, h.LinkSetUp(pl))
	must(t, h.LinkSetUp(lo))
	must(t, h.RouteAdd(&netlink.Route{LinkIndex: pl.Attrs().Index, Gw: g.host.AsSlice()}))
	return g
}

func addr(a netip.Addr) *netlink.Addr {
	return &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(30, 32)}}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func listen(t *testing.T, network, addr string) net.Listener {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

func port(ln net.Listener) uint16 { return uint16(ln.Addr().(*net.TCPAddr).Port) }

// TestJailTraffic applies the rule set to the host end of a veth and sends
// the guest's escapes from inside the namespace.
func TestJailTraffic(t *testing.T) {
	requireNetAdmin(t)
	g := newGuestNS(t)
	h := g.host.String()

	proxyLn := listen(t, "tcp", h+":0")
	transLn := listen(t, "tcp", h+":0")
	otherLn := listen(t, "tcp", h+":0") // a host service the guest must not reach
	// The guest dials :53; the responder sits on a port of its own, as in a run.
	dnsPC, err := net.ListenPacket("udp", h+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dnsPC.Close() })
	otherPC, err := net.ListenPacket("udp", h+":0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { otherPC.Close() })

	table := TableName(fmt.Sprintf("traffic-%d", os.Getpid()))
	t.Cleanup(func() { RemoveTable(table) })
	must(t, Rules{Table: table, Iface: g.hostIf, Host: g.host, Guest: g.guest,
		ProxyPort: port(proxyLn), DNSPort: 53,
		Listen: Listeners{Transparent: port(transLn), DNSUDP: uint16(dnsPC.LocalAddr().(*net.UDPAddr).Port)}}.Install())

	accepted := func(ln net.Listener) chan net.Conn {
		ch := make(chan net.Conn, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				ch <- c
			}
		}()
		return ch
	}
	dial := func(addr string) (net.Conn, error) {
		var c net.Conn
		var err error
		g.inNS(t, func() { c, err = net.DialTimeout("tcp", addr, 700*time.Millisecond) })
		return c, err
	}

	t.Run("forward proxy port connects", func(t *testing.T) {
		got := accepted(proxyLn)
		c, err := dial(proxyLn.Addr().String())
		if err != nil {
			t.Fatalf("dial proxy: %v", err)
		}
		defer c.Close()
		select {
		case s := <-got:
			if s.RemoteAddr().(*net.TCPAddr).AddrPort().Addr().Unmap() != g.guest {
				t.Errorf("proxy saw %s, want the guest %s", s.RemoteAddr(), g.guest)
			}
			s.Close()
		case <-time.After(time.Minute):
			t.Fatal("proxy listener accepted nothing")
		}
	})

	t.Run("other host port fails", func(t *testing.T) {
		before := dropCount(t, table, chainGuestIn, DropOther)
		if c, err := dial(otherLn.Addr().String()); err == nil {
			c.Close()
			t.Fatal("guest reached another host port")
		}
		if after := dropCount(t, table, chainGuestIn, DropOther); after <= before {
			t.Errorf("drop counter %d -> %d, want a rise", before, after)
		}
	})

	t.Run("transparent port only through dnat", func(t *testing.T) {
		if c, err := dial(transLn.Addr().String()); err == nil {
			c.Close()
			t.Fatal("guest reached the transparent port directly")
		}
	})

	t.Run("http to any address lands on the transparent listener", func(t *testing.T) {
		for _, dst := range []string{"198.51.100.80:80", "203.0.113.9:443", h + ":80"} {
			got := accepted(transLn)
			c, err := dial(dst)
			if err != nil {
				t.Fatalf("dial %s: %v", dst, err)
			}
			fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: example.test\r\n\r\n")
			select {
			case s := <-got:
				line, err := bufio.NewReader(s).ReadString('\n')
				if err != nil || !strings.HasPrefix(line, "GET / HTTP/1.1") {
					t.Errorf("%s: listener read %q, %v", dst, line, err)
				}
				s.Close()
			case <-time.After(time.Minute):
				t.Errorf("%s: transparent listener accepted nothing", dst)
			}
			c.Close()
		}
	})

	t.Run("udp to dns port passes, other udp is dropped", func(t *testing.T) {
		before := dropCount(t, table, chainGuestIn, DropOther)
		var errDNS, errOther error
		g.inNS(t, func() {
			var c net.Conn
			if c, errDNS = net.Dial("udp", h+":53"); errDNS == nil {
				_, errDNS = c.Write([]byte("dns"))
				c.Close()
			}
			if c, errOther = net.Dial("udp", otherPC.LocalAddr().String()); errOther == nil {
				_, errOther = c.Write([]byte("escape"))
				c.Close()
			}
		})
		if errDNS != nil || errOther != nil {
			t.Fatalf("send: %v, %v", errDNS, errOther)
		}
		buf := make([]byte, 64)
		dnsPC.SetReadDeadline(time.Now().Add(time.Minute))
		if n, _, err := dnsPC.ReadFrom(buf); err != nil || string(buf[:n]) != "dns" {
			t.Errorf("dns listener got %q, %v", buf[:n], err)
		}
		otherPC.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if n, _, err := otherPC.ReadFrom(buf); err == nil {
			t.Errorf("udp to port %s arrived: %q", otherPC.LocalAddr(), buf[:n])
		}
		if after := dropCount(t, table, chainGuestIn, DropOther); after <= before {
			t.Errorf("drop counter %d -> %d, want a rise", before, after)
		}
	})
}

func setForwarding(t *testing.T, ifname string, on bool) {
	t.Helper()
	v := "0"
	if on {
		v = "1"
	}
	must(t, os.WriteFile("/proc/sys/net/ipv4/conf/"+ifname+"/forwarding", []byte(v), 0o644))
}

// TestJailIsolatesConcurrentRuns routes between two jail links, each with its
// own table, and checks that neither guest reaches the other.
func TestJailIsolatesConcurrentRuns(t *testing.T) {
	requireNetAdmin(t)
	a := newGuestNS(t)
	b := newGuestNS(t)
	setForwarding(t, a.hostIf, true)
	setForwarding(t, b.hostIf, true)
	// b's proxy on a port of its own: a fixed one may be held by another test process.
	bProxy := listen(t, "tcp", b.host.String()+":0")
	var tables []string
	for i, g := range []*guestNS{a, b} {
		table := TableName(fmt.Sprintf("iso-%d-%d", os.Getpid(), i))
		t.Cleanup(func() { RemoveTable(table) })
		must(t, Rules{Table: table, Iface: g.hostIf, Host: g.host, Guest: g.guest,
			ProxyPort: port(bProxy), DNSPort: 53, Listen: Listeners{Transparent: 3129}}.Install())
		tables = append(tables, table)
	}
	var inB net.Listener
	b.inNS(t, func() { inB = listen(t, "tcp", b.guest.String()+":8080") })

	// Both tables hook forward at the same priority and either may see the
	// packet first, so count a's "from guest" and b's "to guest" together.
	forwardDrops := func() uint64 {
		return dropCount(t, tables[0], chainForward, DropForward) + dropCount(t, tables[1], chainForward, DropToGuest)
	}
	fwdBefore := forwardDrops()
	hostBefore := dropCount(t, tables[0], chainGuestIn, DropNotHost)
	for _, dst := range []string{inB.Addr().String(), bProxy.Addr().String()} {
		a.inNS(t, func() {
			if c, err := net.DialTimeout("tcp", dst, 700*time.Millisecond); err == nil {
				c.Close()
				t.Errorf("guest a reached %s of run b", dst)
			}
		})
	}
	if after := forwardDrops(); after <= fwdBefore {
		t.Errorf("forward drop counters %d -> %d, want a rise", fwdBefore, after)
	}
	if after := dropCount(t, tables[0], chainGuestIn, DropNotHost); after <= hostBefore {
		t.Errorf("a's not-host-side drop counter %d -> %d, want a rise", hostBefore, after)
	}
}
