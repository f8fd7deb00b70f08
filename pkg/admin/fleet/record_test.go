package fleet

import (
	"net/netip"
	"testing"

	"github.com/crackbox/crackbox/internal/natstest"
)

// Every address, v6 included, maps to a key the bucket accepts and back.
func TestKeyRoundTrip(t *testing.T) {
	c := natstest.Start(t, 1)
	f := open(t, c.URL(), Options{})
	for _, s := range []string{"10.0.0.2", "fd00::1", "::1", "::ffff:10.0.0.3", "2001:db8:0:1::42"} {
		ip := netip.MustParseAddr(s)
		key := keyOf(ip)
		got, err := ipOf(key)
		if err != nil || got != ip.Unmap() {
			t.Errorf("%s: key %q back to %v, %v", s, key, got, err)
		}
		if err := f.Register(client(t, s, "a.test")); err != nil {
			t.Errorf("%s: register under key %q: %v", s, key, err)
		}
	}
}
