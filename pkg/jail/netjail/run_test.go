package netjail

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	"github.com/vishvananda/netlink"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy"
	"github.com/crackbox/crackbox/pkg/proxy/allow"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// upstreamHTTP serves "hello from upstream" on ln and returns its port.
func upstreamHTTP(t *testing.T, ln net.Listener) int {
	t.Helper()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello from upstream %s", r.Host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// get sends one HTTP/1.1 request over c and returns status, reason header and body.
func get(t *testing.T, c net.Conn, target, host string) (int, string, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(time.Minute))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", target, host)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s (Host %s): %v", target, host, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get(proxy.ErrorHeader), string(b)
}

func TestPrepareProxyOnly(t *testing.T) {
	up := listen(t, "tcp", "127.0.0.1:0")
	port := upstreamHTTP(t, up)
	list, err := allow.Parse([]string{fmt.Sprintf("allowed.test:%d", port)})
	if err != nil {
		t.Fatal(err)
	}
	r, err := Prepare(context.Background(), Options{
		Mode:  jail.NetProxyOnly,
		Allow: list,
		Proxy: proxy.Options{
			AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
			Hosts: map[string][]netip.Addr{
				"allowed.test": {netip.MustParseAddr("127.0.0.1")},
				"blocked.test": {netip.MustParseAddr("127.0.0.1")},
			},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if r.Net.Mode != jail.NetProxyOnly || r.Net.ProxyListen != DefaultProxyListen || r.Net.ProxyURL != "http://"+DefaultProxyListen || r.Net.ProxyConn == nil {
		t.Fatalf("net %+v", r.Net)
	}
	// Each guest connection arrives as a stream; a socket pair stands in.
	stream := func() net.Conn {
		guest, host := net.Pipe()
		go r.Net.ProxyConn(host)
		return guest
	}
	c := stream()
	code, _, body := get(t, c, fmt.Sprintf("http://allowed.test:%d/", port), fmt.Sprintf("allowed.test:%d", port))
	c.Close()
	if code != 200 || !strings.Contains(body, "hello from upstream") {
		t.Fatalf("allowed: %d %q", code, body)
	}
	c = stream()
	code, reason, _ := get(t, c, fmt.Sprintf("http://blocked.test:%d/", port), fmt.Sprintf("blocked.test:%d", port))
	c.Close()
	if code != http.StatusForbidden || reason != proxy.ReasonAllowlist {
		t.Fatalf("blocked: %d reason %q, want 403 %s", code, reason, proxy.ReasonAllowlist)
	}
	want := fmt.Sprintf("crackbox: blocked 1 request: blocked.test:%d (1)", port)
	if got := r.Report(false); got != want {
		t.Errorf("report %q, want %q", got, want)
	}
	if got := r.Report(true); got != "" {
		t.Errorf("quiet report %q", got)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestPrepareLearnAllowsNothingAndListsAttempts(t *testing.T) {
	list, _ := allow.Parse([]string{"allowed.test"})
	r, err := Prepare(context.Background(), Options{
		Mode: jail.NetProxyOnly, Allow: list, Learn: true,
		// The exit lookups of learned names go to a loopback port with no server.
		Proxy: proxy.Options{Hosts: map[string][]netip.Addr{"allowed.test": {netip.MustParseAddr("203.0.113.7")}}, Resolver: "127.0.0.1:9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, target := range []string{"allowed.test", "pypi.org:8443"} {
		guest, host := net.Pipe()
		go r.Net.ProxyConn(host)
		code, reason, _ := get(t, guest, "http://"+target+"/", target)
		guest.Close()
		if code != http.StatusForbidden {
			t.Errorf("learn mode let %s through: %d %s", target, code, reason)
		}
	}
	// allowed.test resolves into TEST-NET-3, which the proxy refuses unless a range opens
	// it: the list names that entry beside --allow.
	want := "crackbox: learn: the command tried to reach 2 hosts; to allow them (--allow-cidr for the address the proxy refuses by default):\n" +
		"  --allow allowed.test,pypi.org:8443 --allow-cidr 203.0.113.7/32"
	if got := r.Report(true); got != want {
		t.Errorf("report %q, want %q", got, want)
	}
}

func TestPrepareNone(t *testing.T) {
	r, err := Prepare(context.Background(), Options{Pool: testPool, Mode: jail.NetNone})
	if err != nil {
		t.Fatal(err)
	}
	if r.Net.Mode != jail.NetNone || r.Report(false) != "" || r.Close() != nil {
		t.Fatalf("none mode: %+v", r)
	}
	if _, err := Prepare(context.Background(), Options{Pool: testPool, Mode: "bridge"}); err == nil {
		t.Fatal("unknown mode accepted")
	}
}

func TestPrepareTapSetsUpAndTearsDown(t *testing.T) {
	requireNetAdmin(t)
	r, err := Prepare(context.Background(), Options{Pool: testPool, Mode: jail.NetTap, RunsDir: t.TempDir(), UID: -1, GID: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	l := r.Link
	want := jail.Tap{Name: l.Tap, File: r.tapFile, GuestAddr: l.GuestCIDR(), Gateway: l.Host.String(), DNS: l.Host.String()}
	if r.tapFile == nil {
		t.Fatal("no tap queue for QEMU")
	}
	// With our queue attached the tap has carrier, as it will with QEMU's.
	link, err := netlink.LinkByName(l.Tap)
	if err != nil {
		t.Fatal(err)
	}
	if st := link.Attrs().OperState; st != netlink.OperUp {
		t.Errorf("tap %s with a queue attached: state %v, want up", l.Tap, st)
	}
	if r.Net.Mode != jail.NetTap || r.Net.Tap == nil || *r.Net.Tap != want || r.Net.ProxyURL != "http://"+l.ProxyAddr() {
		t.Fatalf("net %+v tap %+v, want %+v", r.Net, r.Net.Tap, want)
	}
	// The listeners are up on the host side address before any guest exists.
	for _, p := range []uint16{l.Listen.Proxy, l.Listen.Transparent, l.Listen.DNSTCP} {
		a := hostPort(l.Host, p)
		c, err := net.DialTimeout("tcp", a, time.Second)
		if err != nil {
			t.Errorf("nothing listening on %s: %v", a, err)
			continue
		}
		c.Close()
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if tableExists(t, l.Table) {
		t.Error("table left after Close")
	}
	if _, err := net.Listen("tcp", hostPort(l.Host, 0)); err == nil {
		t.Error("host side address still present after Close")
	}
}

// TestJailedGuestThroughServices is the whole tap-mode path with a netns
// standing in for the guest: DNS, forward proxy and transparent proxy, with
// the rule set in place, against an upstream on a loopback address, while
// wildcard listeners of other programs hold the ports the guest dials.
func TestJailedGuestThroughServices(t *testing.T) {
	requireNetAdmin(t)
	nettest.HoldGuestPorts(t)
	g := newGuestNS(t)
	upAddr := netip.AddrFrom4([4]byte{127, byte(rand.IntN(200) + 20), byte(rand.IntN(250) + 1), byte(rand.IntN(250) + 1)})
	ln, err := net.Listen("tcp", upAddr.String()+":80")
	if err != nil {
		t.Fatalf("upstream on %s:80: %v", upAddr, err)
	}
	t.Cleanup(func() { ln.Close() })
	upstreamHTTP(t, ln)

	list, _ := allow.Parse([]string{"allowed.test"})
	tally := NewTally(nil)
	popts := proxy.Options{
		AllowCIDRs: []netip.Prefix{netip.PrefixFrom(upAddr, 32)},
		Hosts: map[string][]netip.Addr{
			"allowed.test": {upAddr},
			"blocked.test": {upAddr},
		},
		OnDecision: tally.Decision,
	}
	const proxyPort, dnsPort = 3128, 53
	set, err := inject.New([]inject.Secret{{Name: "API_KEY", Hosts: []string{"allowed.test"}, Value: "sk-value-0123456789"}})
	if err != nil {
		t.Fatal(err)
	}
	svc, err := startServices(popts, proxy.Client{ID: "veth", IP: g.guest, Allow: list, Secrets: set}, g.host, tally.Query)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.close() })
	table := TableName(fmt.Sprintf("svc-%d", rand.IntN(1<<30)))
	t.Cleanup(func() { RemoveTable(table) })
	must(t, Rules{Table: table, Iface: g.hostIf, Host: g.host, Guest: g.guest,
		ProxyPort: proxyPort, DNSPort: dnsPort, Listen: svc.listen}.Install())

	dial := func(addr string) net.Conn {
		t.Helper()
		var c net.Conn
		var err error
		g.inNS(t, func() { c, err = net.DialTimeout("tcp", addr, 2*time.Second) })
		if err != nil {
			t.Fatalf("dial %s from the guest: %v", addr, err)
		}
		return c
	}
	h := g.host.String()

	t.Run("dns", func(t *testing.T) {
		for _, tc := range []struct {
			name  string
			rcode int
			want  string
		}{
			{"allowed.test.", mdns.RcodeSuccess, upAddr.String()},
			{"unlisted.test.", mdns.RcodeNameError, ""},
			// A placeholder leaving as a name is refused even under an allowed one.
			{set.Placeholder("API_KEY") + ".allowed.test.", mdns.RcodeNameError, ""},
		} {
			m := new(mdns.Msg)
			m.SetQuestion(tc.name, mdns.TypeA)
			var resp *mdns.Msg
			var err error
			g.inNS(t, func() {
				resp, _, err = (&mdns.Client{Timeout: 3 * time.Second}).Exchange(m, h+":53")
			})
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			got := ""
			if len(resp.Answer) == 1 {
				got = resp.Answer[0].(*mdns.A).A.String()
			}
			if resp.Rcode != tc.rcode || got != tc.want {
				t.Errorf("%s: %s %q, want %s %q", tc.name, mdns.RcodeToString[resp.Rcode], got, mdns.RcodeToString[tc.rcode], tc.want)
			}
		}

	})
	t.Run("forward proxy", func(t *testing.T) {
		c := dial(netip.AddrPortFrom(g.host, proxyPort).String())
		code, _, body := get(t, c, "http://allowed.test/", "allowed.test")
		c.Close()
		if code != 200 || body != "hello from upstream allowed.test" {
			t.Errorf("allowed: %d %q", code, body)
		}
		c = dial(netip.AddrPortFrom(g.host, proxyPort).String())
		code, reason, _ := get(t, c, "http://blocked.test/", "blocked.test")
		c.Close()
		if code != http.StatusForbidden || reason != proxy.ReasonAllowlist {
			t.Errorf("blocked: %d %q", code, reason)
		}
	})
	t.Run("transparent", func(t *testing.T) {
		// The guest ignores proxy settings and dials some address on :80.
		c := dial("198.51.100.80:80")
		code, _, body := get(t, c, "/", "allowed.test")
		c.Close()
		if code != 200 || body != "hello from upstream allowed.test" {
			t.Errorf("allowed: %d %q", code, body)
		}
		c = dial("198.51.100.80:80")
		code, reason, _ := get(t, c, "/", "blocked.test")
		c.Close()
		if code != http.StatusForbidden || reason != proxy.ReasonAllowlist {
			t.Errorf("blocked: %d %q", code, reason)
		}
	})
	want := "crackbox: refused 1 attempt to send a secret's placeholder where it is not bound: API_KEY (1); blocked 2 requests: blocked.test (2); refused DNS for 1 name: unlisted.test"
	if got := tally.Summary(); got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}

// TestReportNamesRefusedAddress: an allowed name whose only address the proxy refuses
// (here TEST-NET-3, as a lab resolver may answer) is named in the exit summary with the
// address, its class and the --allow-cidr entry that opens it.
func TestReportNamesRefusedAddress(t *testing.T) {
	list, _ := allow.Parse([]string{"registry.test"})
	r, err := Prepare(context.Background(), Options{
		Mode: jail.NetProxyOnly, Allow: list,
		Proxy: proxy.Options{Hosts: map[string][]netip.Addr{"registry.test": {netip.MustParseAddr("203.0.113.7")}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	guest, host := net.Pipe()
	go r.Net.ProxyConn(host)
	code, reason, _ := get(t, guest, "http://registry.test/", "registry.test")
	guest.Close()
	if code != http.StatusForbidden || reason != proxy.ReasonPrivateAddress {
		t.Fatalf("got %d %s, want 403 %s", code, reason, proxy.ReasonPrivateAddress)
	}
	got := r.Report(false)
	for _, want := range []string{"registry.test resolves only to 203.0.113.7, a documentation address (TEST-NET-3", "--allow-cidr 203.0.113.7/32", "allow_cidrs"} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q: %q", want, got)
		}
	}
}
