package proxy_test

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// netnsLab is a network namespace playing the sandbox, joined to the host by
// a veth pair whose host side carries the upstream servers' addresses.
type netnsLab struct {
	ns       string // named netns
	hostIf   string // host end of the veth
	hostIP   netip.Addr
	evilIP   netip.Addr // second host-side address for the server that must not be reached
	guestIP  netip.Addr
	prefix   netip.Prefix
	nftTable *nftables.Table
}

func TestTransparentInNetns(t *testing.T) {
	testreq.Root(t, "creates a network namespace, veth and nftables table")
	testreq.Command(t, "ip", "iproute2")
	testreq.Command(t, "curl", "curl")
	lab := newNetnsLab(t)

	// Two upstreams on the host side: "good" answers for allowed.test, "evil"
	// for evil.test. Each listens on :80 and :443 of its own address.
	var evilHits atomic.Int64
	serve := func(ip netip.Addr, name string, hits *atomic.Int64) {
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if hits != nil {
				hits.Add(1)
			}
			peer, _, _ := net.SplitHostPort(r.RemoteAddr)
			fmt.Fprintf(w, "server=%s host=%s peer=%s", name, r.Host, peer)
		})
		for _, tlsOn := range []bool{false, true} {
			port := 80
			if tlsOn {
				port = 443
			}
			ln, err := net.Listen("tcp", netip.AddrPortFrom(ip, uint16(port)).String())
			if err != nil {
				t.Fatalf("upstream %s:%d: %v", ip, port, err)
			}
			s := httptest.NewUnstartedServer(h)
			s.Listener.Close()
			s.Listener = ln
			if tlsOn {
				s.StartTLS()
			} else {
				s.Start()
			}
			t.Cleanup(s.Close)
		}
	}
	serve(lab.hostIP, "good", nil)
	serve(lab.evilIP, "evil", &evilHits)

	var (
		decMu     sync.Mutex
		decisions []proxy.Decision
	)
	lastDecision := func() proxy.Decision {
		decMu.Lock()
		defer decMu.Unlock()
		if len(decisions) == 0 {
			return proxy.Decision{}
		}
		return decisions[len(decisions)-1]
	}

	reg := proxy.NewRegistry()
	list, err := allow.Parse([]string{"allowed.test"})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(proxy.Client{ID: "netns", IP: lab.guestIP, Allow: list}); err != nil {
		t.Fatal(err)
	}
	px, err := proxy.New(proxy.Options{
		// The upstreams sit on host addresses, which a range alone never
		// opens: the good one is named exactly.
		AllowCIDRs: []netip.Prefix{lab.prefix, netip.PrefixFrom(lab.hostIP, 32)},
		Hosts: map[string][]netip.Addr{
			"allowed.test": {lab.hostIP},
			"evil.test":    {lab.evilIP},
		},
		DialTimeout: 3 * time.Second,
		OnDecision: func(d proxy.Decision) {
			decMu.Lock()
			decisions = append(decisions, d)
			decMu.Unlock()
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}, reg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", netip.AddrPortFrom(lab.hostIP, 0).String())
	if err != nil {
		t.Fatal(err)
	}
	go px.ServeTransparent(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		px.Shutdown(ctx)
	})
	lab.redirect(t, uint16(ln.Addr().(*net.TCPAddr).Port))

	// Upstreams see the proxy's address as the peer; a direct connection
	// from the sandbox would show the guest address.
	viaProxy := "peer=" + lab.hostIP.String()
	tests := []struct {
		name    string
		url     string
		resolve netip.Addr // address curl connects to for the URL's name
		wantOK  bool
		want    string // body substring when wantOK
	}{
		{"allowed http", "http://allowed.test/", lab.hostIP, true, "server=good host=allowed.test " + viaProxy},
		{"allowed https", "https://allowed.test/", lab.hostIP, true, "server=good host=allowed.test " + viaProxy},
		{"unlisted http", "http://evil.test/", lab.evilIP, false, ""},
		{"unlisted https", "https://evil.test/", lab.evilIP, false, ""},
		// The name is allowed but the client aimed at the evil server's IP:
		// the proxy dials what it resolves for the name, so good answers.
		{"forged sni lands on resolved address", "https://allowed.test/", lab.evilIP, true, "server=good host=allowed.test " + viaProxy},
		{"forged host lands on resolved address", "http://allowed.test/", lab.evilIP, true, "server=good host=allowed.test " + viaProxy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u, _ := strings.CutPrefix(tt.url, "http")
			port := "80"
			if strings.HasPrefix(u, "s") {
				port = "443"
			}
			name := strings.Split(strings.SplitN(tt.url, "//", 2)[1], "/")[0]
			code, body, err := lab.curl(t, "--resolve", name+":"+port+":"+tt.resolve.String(), tt.url)
			if tt.wantOK {
				if err != nil || code != 200 || !strings.Contains(body, tt.want) {
					t.Fatalf("want 200 %q, got %d %q (%v)", tt.want, code, body, err)
				}
				return
			}
			if err == nil && code == 200 {
				t.Fatalf("refused name got through: %d %q", code, body)
			}
			if d := lastDecision(); d.Allowed || d.Host != "evil.test" || d.Reason != proxy.ReasonAllowlist || d.ClientID != "netns" {
				t.Errorf("last decision %+v, want a blocked-by-allowlist denial of evil.test for client netns", d)
			}
		})
	}
	if n := evilHits.Load(); n != 0 {
		t.Errorf("the evil server was reached %d times", n)
	}
	// evilIP is a real address of this host inside the allowed range, but
	// not named exactly: the range alone must not open it.
	if got, err := px.Resolve(context.Background(), "evil.test"); !errors.Is(err, proxy.ErrPrivateAddress) {
		t.Errorf("host address %s in allowed range %s resolved: %v %v", lab.evilIP, lab.prefix, got, err)
	}
}

// curl runs curl inside the namespace and returns the status code and body.
func (l *netnsLab) curl(t *testing.T, args ...string) (int, string, error) {
	t.Helper()
	full := append([]string{"netns", "exec", l.ns, "curl", "-sS", "-k", "--max-time", "10",
		"-o", "-", "-w", "\n%{http_code}"}, args...)
	out, err := exec.Command("ip", full...).CombinedOutput()
	s := strings.TrimRight(string(out), "\n")
	i := strings.LastIndexByte(s, '\n')
	var code int
	fmt.Sscanf(s[i+1:], "%d", &code)
	return code, s[:max(i, 0)], err
}

func randomTag() (string, byte) {
	var b [3]byte
	rand.Read(b[:])
	return fmt.Sprintf("%02x%02x", b[0], b[1]), 16 + b[2]%200
}

// newNetnsLab creates the namespace and veth; everything is removed on cleanup.
func newNetnsLab(t *testing.T) *netnsLab {
	t.Helper()
	tag, octet := randomTag()
	l := &netnsLab{
		ns:      "cbxt" + tag,
		hostIf:  "cbxh" + tag,
		prefix:  netip.MustParsePrefix(fmt.Sprintf("10.252.%d.0/24", octet)),
		hostIP:  netip.MustParseAddr(fmt.Sprintf("10.252.%d.1", octet)),
		guestIP: netip.MustParseAddr(fmt.Sprintf("10.252.%d.2", octet)),
		evilIP:  netip.MustParseAddr(fmt.Sprintf("10.252.%d.3", octet)),
	}
	guestIf := "cbxg" + tag

	// Creating a named netns switches the calling thread into it, so do it on
	// a locked thread that is thrown away afterwards.
	type res struct {
		ns  netns.NsHandle
		err error
	}
	ch := make(chan res, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with the goroutine
		ns, err := netns.NewNamed(l.ns)
		ch <- res{ns, err}
	}()
	r := <-ch
	if r.err != nil {
		testreq.Missing(t, "network namespaces", fmt.Sprintf("creating one failed (%v): run as root on a kernel with CONFIG_NET_NS", r.err))
	}
	t.Cleanup(func() {
		r.ns.Close()
		if err := netns.DeleteNamed(l.ns); err != nil {
			t.Errorf("delete netns %s: %v", l.ns, err)
		}
	})

	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: l.hostIf}, PeerName: guestIf}
	if err := netlink.LinkAdd(veth); err != nil {
		t.Fatalf("add veth: %v", err)
	}
	t.Cleanup(func() {
		// Deleting either end removes both; the netns deletion may have done it already.
		if link, err := netlink.LinkByName(l.hostIf); err == nil {
			netlink.LinkDel(link)
		}
	})
	host, err := netlink.LinkByName(l.hostIf)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := netlink.LinkByName(guestIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetNsFd(peer, int(r.ns)); err != nil {
		t.Fatalf("move veth peer into netns: %v", err)
	}
	for _, a := range []netip.Addr{l.hostIP, l.evilIP} {
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(24, 32)}}
		if err := netlink.AddrAdd(host, addr); err != nil {
			t.Fatalf("host address %s: %v", a, err)
		}
	}
	if err := netlink.LinkSetUp(host); err != nil {
		t.Fatal(err)
	}

	h, err := netlink.NewHandleAt(r.ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	gl, err := h.LinkByName(guestIf)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.AddrAdd(gl, &netlink.Addr{IPNet: &net.IPNet{IP: l.guestIP.AsSlice(), Mask: net.CIDRMask(24, 32)}}); err != nil {
		t.Fatal(err)
	}
	for _, link := range []string{"lo", guestIf} {
		ll, err := h.LinkByName(link)
		if err != nil {
			t.Fatal(err)
		}
		if err := h.LinkSetUp(ll); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

// redirect installs an nftables nat table that sends TCP :80 and :443
// arriving on the host end of the veth to the transparent proxy port.
func (l *netnsLab) redirect(t *testing.T, port uint16) {
	t.Helper()
	conn, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	table := conn.AddTable(&nftables.Table{Family: nftables.TableFamilyIPv4, Name: "crackbox_test_" + l.hostIf})
	chain := conn.AddChain(&nftables.Chain{
		Name:     "prerouting",
		Table:    table,
		Type:     nftables.ChainTypeNAT,
		Hooknum:  nftables.ChainHookPrerouting,
		Priority: nftables.ChainPriorityNATDest,
	})
	ifname := make([]byte, unix.IFNAMSIZ)
	copy(ifname, l.hostIf)
	for _, dport := range []uint16{80, 443} {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: []expr.Any{
			&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname},
			&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(dport)},
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
			&expr.Redir{RegisterProtoMin: 1},
		}})
	}
	if err := conn.Flush(); err != nil {
		t.Fatalf("install nftables redirect: %v", err)
	}
	l.nftTable = table
	t.Cleanup(func() {
		c, err := nftables.New()
		if err != nil {
			t.Errorf("nftables cleanup: %v", err)
			return
		}
		c.DelTable(table)
		if err := c.Flush(); err != nil {
			t.Errorf("delete nftables table %s: %v", table.Name, err)
		}
	})
}
