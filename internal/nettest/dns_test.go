package nettest

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
)

func TestDNS(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.7"), netip.MustParseAddr("2001:db8::7")
	addr := DNS(t, map[string][]netip.Addr{"both.test": {v4, v6}, "empty.test": nil})
	r := &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
	ctx := context.Background()
	for _, tc := range []struct {
		network string
		want    []netip.Addr
	}{{"ip4", []netip.Addr{v4}}, {"ip6", []netip.Addr{v6}}} {
		got, err := r.LookupNetIP(ctx, tc.network, "both.test.")
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("%s both.test = %v, %v; want %v", tc.network, got, err, tc.want)
		}
	}
	var de *net.DNSError
	if _, err := r.LookupNetIP(ctx, "ip", "missing.test."); !errors.As(err, &de) || !de.IsNotFound {
		t.Errorf("missing.test: %v, want not found", err)
	}
	if got, err := r.LookupNetIP(ctx, "ip", "empty.test."); err == nil {
		t.Errorf("empty.test = %v, want no address", got)
	}
}
