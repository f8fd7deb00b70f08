package proxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// TestTenantListsKeepTheGuard: with TenantLists an address entry opens a
// literal only inside the operator's AllowCIDRs, and Refuse keeps the
// host's daemon listeners shut whatever the lists and ranges say.
func TestTenantListsKeepTheGuard(t *testing.T) {
	srv := echoServer(t)
	host := strings.TrimPrefix(srv.URL, "http://")
	port := portOf(t, srv.URL)
	ap := netip.MustParseAddrPort(host)
	withPort := func(e string) string { return fmt.Sprintf("%s:%d", e, port) }
	named := "daemon.test:" + fmt.Sprint(port)
	cases := []struct {
		name    string
		opts    Options
		entries []string
		req     string
		status  int
		reason  string
	}{
		{"a tenant's loopback literal", Options{TenantLists: true}, []string{withPort("127.0.0.1")}, get(host, "/ip"), 403, ReasonPrivateAddress},
		{"a tenant's loopback range", Options{TenantLists: true}, []string{withPort("127.0.0.0/8")}, get(host, "/ip"), 403, ReasonPrivateAddress},
		{"a tenant's everything range", Options{TenantLists: true}, []string{withPort("0.0.0.0/0")}, get(host, "/ip"), 403, ReasonPrivateAddress},
		{"the operator's range opens the tenant's literal", Options{TenantLists: true, AllowCIDRs: []netip.Prefix{loopback8}}, []string{withPort("127.0.0.1")}, get(host, "/ip"), 200, ""},
		{"a literal still needs the tenant's entry", Options{TenantLists: true, AllowCIDRs: []netip.Prefix{loopback8}}, []string{"example.com"}, get(host, "/ip"), 403, ReasonAllowlist},
		{"the daemon's listener by literal", Options{TenantLists: true, AllowCIDRs: []netip.Prefix{loopback8}, Refuse: []netip.AddrPort{ap}}, []string{withPort("127.0.0.1")}, get(host, "/ip"), 403, ReasonPrivateAddress},
		{"the daemon's listener by name", Options{AllowCIDRs: []netip.Prefix{loopback8}, Hosts: hostsFor("daemon.test"), Refuse: []netip.AddrPort{ap}}, []string{named}, get(named, "/ip"), 403, ReasonPrivateAddress},
		{"a listener on every address", Options{AllowCIDRs: []netip.Prefix{loopback8}, Hosts: hostsFor("daemon.test"), Refuse: []netip.AddrPort{netip.AddrPortFrom(netip.IPv6Unspecified(), ap.Port())}}, []string{named}, get(named, "/ip"), 403, ReasonPrivateAddress},
		{"another port of the host stays the operator's", Options{AllowCIDRs: []netip.Prefix{loopback8}, Hosts: hostsFor("daemon.test"), Refuse: []netip.AddrPort{netip.AddrPortFrom(ap.Addr(), ap.Port()+1)}}, []string{named}, get(named, "/ip"), 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tp := startProxy(t, tc.opts, tc.entries)
			rc := dialProxy(t, tp.addr)
			resp, body := rc.do(t, "GET", tc.req)
			if tc.status != 200 {
				expectRefusal(t, resp, body, tc.status, tc.reason)
			} else if resp.StatusCode != 200 {
				t.Fatalf("got %d %q", resp.StatusCode, body)
			}
			rc.Close()
			if d := tp.next(t); d.Reason != tc.reason {
				t.Errorf("decision reason %q, want %q", d.Reason, tc.reason)
			}
		})
	}
}

func TestSpecialPurpose(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1/32": true, "10.1.2.3/32": true, "100.64.0.1/32": true, "169.254.169.254/32": true,
		"0.0.0.0/0": true, "8.0.0.0/7": false, "93.184.216.34/32": false, "::1/128": true,
		"fe80::1/128": true, "64:ff9b::a00:1/128": true, "2606:4700::/32": false,
	} {
		if got := SpecialPurpose(netip.MustParsePrefix(s)); got != want {
			t.Errorf("SpecialPurpose(%s) = %v, want %v", s, got, want)
		}
	}
}
