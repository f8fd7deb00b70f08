package netjail

import (
	"errors"
	"net/netip"
	"os"
	"testing"
)

func TestClaimSubnet(t *testing.T) {
	pool := netip.MustParsePrefix("10.213.0.0/16")
	tests := []struct {
		name string
		pool netip.Prefix
		busy []string
		want string
		err  error
	}{
		{"first free", pool, nil, "10.213.0.0/30", nil},
		{"skips a host /24", pool, []string{"10.213.0.0/24"}, "10.213.1.0/30", nil},
		{"skips a host address", pool, []string{"10.213.0.1/32", "10.213.0.6/32"}, "10.213.0.8/30", nil},
		{"covered by a host route", pool, []string{"10.0.0.0/8"}, "", ErrPoolExhausted},
		{"single /30 pool", netip.MustParsePrefix("10.99.0.4/30"), nil, "10.99.0.4/30", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var busy []netip.Prefix
			for _, b := range tc.busy {
				busy = append(busy, netip.MustParsePrefix(b))
			}
			c, err := claimSubnet(t.TempDir(), tc.pool, busy, record{owner: owner{PID: os.Getpid()}})
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("err %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer c.release()
			if c.subnet.String() != tc.want {
				t.Fatalf("claimed %s, want %s", c.subnet, tc.want)
			}
		})
	}
}

func TestClaimsExcludeEachOtherUntilReleased(t *testing.T) {
	dir := t.TempDir()
	pool := netip.MustParsePrefix("10.99.0.0/29") // two /30s
	me := record{owner: owner{PID: os.Getpid()}}
	a, err := claimSubnet(dir, pool, nil, me)
	if err != nil {
		t.Fatal(err)
	}
	b, err := claimSubnet(dir, pool, nil, me)
	if err != nil {
		t.Fatal(err)
	}
	if a.subnet == b.subnet {
		t.Fatalf("both claims got %s", a.subnet)
	}
	if _, err := claimSubnet(dir, pool, nil, me); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("third claim: %v, want ErrPoolExhausted", err)
	}
	if err := a.release(); err != nil {
		t.Fatal(err)
	}
	c, err := claimSubnet(dir, pool, nil, me)
	if err != nil {
		t.Fatalf("claim after release: %v", err)
	}
	if c.subnet != a.subnet {
		t.Fatalf("got %s, want the released %s", c.subnet, a.subnet)
	}
	b.release()
	c.release()
}

func TestStaleClaimIsReclaimedButLiveUnlockedOneIsNot(t *testing.T) {
	dir := t.TempDir()
	pool := netip.MustParsePrefix("10.99.0.0/30")
	// A claim file left by a dead process (its lock died with it).
	dead := deadOwner(t, "gone")
	c, err := claimSubnet(dir, pool, nil, record{owner: dead})
	if err != nil {
		t.Fatal(err)
	}
	c.f.Close()
	again, err := claimSubnet(dir, pool, nil, record{owner: owner{PID: os.Getpid()}})
	if err != nil {
		t.Fatalf("stale claim not reclaimed: %v", err)
	}
	again.f.Close() // unlocked, but its owner (this process) is alive
	if _, err := claimSubnet(dir, pool, nil, record{owner: owner{PID: os.Getpid()}}); !errors.Is(err, ErrPoolExhausted) {
		t.Fatalf("claim of a live owner was taken over: %v", err)
	}
}

func TestValidatePool(t *testing.T) {
	for _, s := range []string{"10.0.0.0/31", "fd00::/64"} {
		if _, err := validatePool(netip.MustParsePrefix(s)); err == nil {
			t.Errorf("pool %s accepted", s)
		}
	}
	if p, err := validatePool(netip.Prefix{}); err != nil || p != DefaultPool {
		t.Errorf("zero pool = %s, %v; want default", p, err)
	}
}

func TestOwnerTagRoundTrip(t *testing.T) {
	o := owner{RunID: "r-1", PID: 42, Start: 99}
	got, ok := parseTag(o.tag())
	if !ok || got != o {
		t.Fatalf("parseTag(%q) = %+v, %v", o.tag(), got, ok)
	}
	for _, bad := range []string{"", "crackbox", "other run=a pid=1 start=2", "crackbox run=a pid=x start=2"} {
		if _, ok := parseTag(bad); ok {
			t.Errorf("parseTag(%q) accepted", bad)
		}
	}
	if len(TapName("some-long-run-id-1234567890")) > 15 {
		t.Errorf("tap name too long")
	}
}
