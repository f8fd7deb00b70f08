package netjail

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"
	"golang.org/x/sys/unix"

	"github.com/crackbox/crackbox/internal/testreq"
)

// testPool keeps this package's taps and veths out of DefaultPool, which crackbox runs
// (and other packages' tests running at the same time) claim from a different claims dir.
var testPool = netip.MustParsePrefix("10.212.0.0/16")

// requireNetAdmin stops tests that create taps, veths and nft tables through testreq
// unless this process may.
func requireNetAdmin(t *testing.T) {
	t.Helper()
	testreq.Check(t, Available(), "tap networking",
		"run as root (CAP_NET_ADMIN) on a host with /dev/net/tun (modprobe tun)")
}

// describe renders a rule as a compact nft-like string so tests can compare
// whole rule sets as read back from the kernel.
func describe(r *nftables.Rule) string {
	var parts []string
	ex := r.Exprs
	for i := 0; i < len(ex); i++ {
		switch e := ex[i].(type) {
		case *expr.Meta:
			c, ok := next[*expr.Cmp](ex, &i)
			if !ok {
				parts = append(parts, fmt.Sprintf("meta%d", e.Key))
				continue
			}
			switch e.Key {
			case expr.MetaKeyIIFNAME, expr.MetaKeyOIFNAME:
				dir := map[expr.MetaKey]string{expr.MetaKeyIIFNAME: "iif", expr.MetaKeyOIFNAME: "oif"}[e.Key]
				parts = append(parts, dir+"="+strings.TrimRight(string(c.Data), "\x00"))
			case expr.MetaKeyNFPROTO:
				parts = append(parts, map[byte]string{unix.NFPROTO_IPV4: "ipv4", unix.NFPROTO_IPV6: "ipv6"}[c.Data[0]])
			case expr.MetaKeyL4PROTO:
				parts = append(parts, map[byte]string{unix.IPPROTO_TCP: "tcp", unix.IPPROTO_UDP: "udp", unix.IPPROTO_ICMP: "icmp"}[c.Data[0]])
			}
		case *expr.Payload:
			c, ok := next[*expr.Cmp](ex, &i)
			if !ok {
				parts = append(parts, "payload?")
				continue
			}
			op := "=="
			if c.Op == expr.CmpOpNeq {
				op = "!="
			}
			switch {
			case e.Base == expr.PayloadBaseNetworkHeader && (e.Offset == 12 || e.Offset == 16):
				a, _ := netip.AddrFromSlice(c.Data)
				parts = append(parts, map[uint32]string{12: "saddr", 16: "daddr"}[e.Offset]+op+a.String())
			case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 2:
				parts = append(parts, fmt.Sprintf("dport%s%d", op, binary.BigEndian.Uint16(c.Data)))
			case e.Base == expr.PayloadBaseTransportHeader && e.Offset == 0 && e.Len == 1:
				parts = append(parts, fmt.Sprintf("icmptype%s%d", op, c.Data[0]))
			}
		case *expr.Ct:
			b, ok := next[*expr.Bitwise](ex, &i)
			if ok {
				next[*expr.Cmp](ex, &i)
				name := map[expr.CtKey]string{expr.CtKeySTATE: "state", expr.CtKeySTATUS: "status"}[e.Key]
				parts = append(parts, fmt.Sprintf("ct-%s&%#x", name, binary.NativeEndian.Uint32(b.Mask)))
			}
		case *expr.Immediate:
			if len(e.Data) == 4 {
				a, _ := netip.AddrFromSlice(e.Data)
				parts = append(parts, "to="+a.String())
			} else if len(e.Data) == 2 {
				parts = append(parts, fmt.Sprintf("port=%d", binary.BigEndian.Uint16(e.Data)))
			}
		case *expr.NAT:
			parts = append(parts, "dnat")
		case *expr.Counter:
			parts = append(parts, "counter")
		case *expr.Verdict:
			switch e.Kind {
			case expr.VerdictAccept:
				parts = append(parts, "accept")
			case expr.VerdictDrop:
				parts = append(parts, "drop")
			case expr.VerdictJump:
				parts = append(parts, "jump:"+e.Chain)
			default:
				parts = append(parts, fmt.Sprintf("verdict%d", e.Kind))
			}
		default:
			parts = append(parts, fmt.Sprintf("%T", e))
		}
	}
	if s, ok := userdata.GetString(r.UserData, userdata.TypeComment); ok && !strings.HasPrefix(s, ownerTag) {
		parts = append(parts, "#"+s)
	}
	return strings.Join(parts, " ")
}

func next[T expr.Any](ex []expr.Any, i *int) (T, bool) {
	var zero T
	if *i+1 >= len(ex) {
		return zero, false
	}
	v, ok := ex[*i+1].(T)
	if ok {
		*i++
	}
	return v, ok
}

// getRules reads one chain of an inet table back from the kernel.
func getRules(t *testing.T, table, chain string) []*nftables.Rule {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tb := &nftables.Table{Name: table, Family: nftables.TableFamilyINet}
	rules, err := c.GetRules(tb, &nftables.Chain{Name: chain, Table: tb})
	if err != nil {
		t.Fatalf("get rules %s/%s: %v", table, chain, err)
	}
	return rules
}

// chainRules returns the described rules of one chain of a table.
func chainRules(t *testing.T, table, chain string) []string {
	t.Helper()
	rules := getRules(t, table, chain)
	out := make([]string, len(rules))
	for i, r := range rules {
		out[i] = describe(r)
	}
	return out
}

// dropCount returns the packet counter of the rule with the given comment.
func dropCount(t *testing.T, table, chain, comment string) uint64 {
	t.Helper()
	for _, r := range getRules(t, table, chain) {
		if s, _ := userdata.GetString(r.UserData, userdata.TypeComment); s != comment {
			continue
		}
		for _, e := range r.Exprs {
			if c, ok := e.(*expr.Counter); ok {
				return c.Packets
			}
		}
	}
	t.Fatalf("no counter rule %q in %s/%s", comment, table, chain)
	return 0
}

// tableExists reports whether an inet table of that name is present.
func tableExists(t *testing.T, name string) bool {
	t.Helper()
	c, err := nftables.New()
	if err != nil {
		t.Fatal(err)
	}
	tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
	if err != nil {
		t.Fatal(err)
	}
	for _, tb := range tables {
		if tb.Name == name {
			return true
		}
	}
	return false
}

// wantRules compares whole chains, printing both sides on mismatch.
func wantRules(t *testing.T, table, chain string, want []string) {
	t.Helper()
	got := chainRules(t, table, chain)
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("chain %s:\ngot:\n  %s\nwant:\n  %s", chain, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}
