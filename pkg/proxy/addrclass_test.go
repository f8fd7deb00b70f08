package proxy

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"
)

// TestBlockedAddressNamesClassAndFix: an allowed name that resolves into a refused range
// gets a 403 whose body, decision and decision log line name the address, what kind of
// address it is and the operator's fix, instead of pointing at the allowlist the name
// is already on.
func TestBlockedAddressNamesClassAndFix(t *testing.T) {
	tests := []struct {
		name, addr, class string
	}{
		{"registry.test", "203.0.113.7", "documentation address (TEST-NET-3"},
		{"docs1.test", "192.0.2.9", "documentation address (TEST-NET-1"},
		{"bench.test", "198.18.0.5", "benchmarking address"},
		{"cgnat.test", "100.64.1.1", "CGNAT"},
		{"private.test", "10.1.2.3", "private address (RFC 1918"},
		{"meta.test", "169.254.169.254", "link-local address"},
		{"loop.test", "127.0.0.5", "loopback address of the proxy host"},
		{"ula.test", "fd00::5", "unique local address"},
	}
	hosts := map[string][]netip.Addr{}
	var names []string
	for _, tc := range tests {
		hosts[tc.name] = []netip.Addr{netip.MustParseAddr(tc.addr)}
		names = append(names, tc.name)
	}
	tp := startProxy(t, Options{Hosts: hosts}, names)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rc := dialProxy(t, tp.addr)
			resp, body := rc.do(t, "GET", get(tc.name, "/"))
			expectRefusal(t, resp, body, http.StatusForbidden, ReasonPrivateAddress)
			cidr := netip.PrefixFrom(netip.MustParseAddr(tc.addr), netip.MustParseAddr(tc.addr).BitLen()).String()
			for _, want := range []string{tc.name + " is allowed", tc.addr, tc.class, "--allow-cidr " + cidr, "allow_cidrs"} {
				if !strings.Contains(body, want) {
					t.Errorf("body lacks %q:\n%s", want, body)
				}
			}
			if strings.Contains(body, "add it to the allowlist") || strings.Contains(body, "private, loopback or link-local") {
				t.Errorf("body points at the allowlist or the wrong range:\n%s", body)
			}
			d := tp.next(t)
			if d.IP != tc.addr || !strings.Contains(d.Class, tc.class) || !strings.Contains(d.Fix, "--allow-cidr "+cidr) {
				t.Errorf("decision ip %q class %q fix %q, want %s, %q and --allow-cidr %s", d.IP, d.Class, d.Fix, tc.addr, tc.class, cidr)
			}
			lines := tp.log.lines(t)
			if len(lines) != i+1 {
				t.Fatalf("decision log has %d lines, want %d", len(lines), i+1)
			}
			l := lines[i]
			if l["ip"] != tc.addr || !strings.Contains(l["class"].(string), tc.class) || !strings.Contains(l["fix"].(string), "allow_cidrs") {
				t.Errorf("decision log line %v lacks the address, class or fix", l)
			}
		})
	}
}

// TestBlockedLiteralNamesTheAllowlistEntry: an IP literal of the proxy host itself that a
// broad allowlist range covers (0.0.0.0/0) is refused with the address, its class and the exact
// entry that opens it; AllowCIDRs never open a literal, so the fix does not name them.
func TestBlockedLiteralNamesTheAllowlistEntry(t *testing.T) {
	tp := startProxy(t, Options{}, []string{"0.0.0.0/0"})
	rc := dialProxy(t, tp.addr)
	resp, body := rc.do(t, "GET", get("0.0.0.0", "/"))
	expectRefusal(t, resp, body, http.StatusForbidden, ReasonPrivateAddress)
	for _, want := range []string{"0.0.0.0 is the unspecified address", "--allow 0.0.0.0"} {
		if !strings.Contains(body, want) {
			t.Errorf("body lacks %q:\n%s", want, body)
		}
	}
	if strings.Contains(body, "--allow-cidr") {
		t.Errorf("a literal's fix names --allow-cidr, which never opens one:\n%s", body)
	}
}
