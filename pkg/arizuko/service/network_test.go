package service

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// TestTenantAllowlistCannotOpenTheHost: a tenant holding network:allow on
// its own folder cannot allowlist loopback, private, CGNAT or link-local
// addresses; each attempt is refused as denied and audited, public
// literals and names pass, and a range the operator's allow_cidrs cover
// passes too.
func TestTenantAllowlistCannotOpenTheHost(t *testing.T) {
	l, admin := newLocal(t, nil)
	l.opts.AllowCIDRs = []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}
	mustFolders(t, l, admin, "acme")
	if _, err := l.AddGrant(admin, acl.Grant{Principal: "folder:acme", Action: "network:allow", Scope: "acme", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	tenant := WithPrincipal(context.Background(), "folder:acme")
	for _, h := range []string{"127.0.0.1:7480", "127.0.0.0/8", "[::1]:7480", "10.0.0.5", "192.168.1.1:22",
		"100.64.0.1", "169.254.169.254", "0.0.0.0/0", "[fe80::1]", "10.0.0.0/8"} {
		for _, who := range []context.Context{tenant, admin} {
			before := auditCount(t, l)
			_, err := l.SetNetworkRule(who, store.NetworkRule{Folder: "acme", Host: h, Effect: "allow"})
			if !errors.Is(err, ErrDenied) && !errors.Is(err, acl.ErrDenied) || !strings.Contains(err.Error(), "allow_cidrs") {
				t.Errorf("%s by %s: %v, want a denial naming allow_cidrs", h, Principal(who), err)
			}
			if got := auditCount(t, l); got != before+1 {
				t.Errorf("%s: %d audit rows added, want 1", h, got-before)
			}
		}
	}
	a, _ := l.Store().ListAudit(context.Background(), 1)
	if len(a) != 1 || a[0].Principal != AdminPrincipal || a[0].Action != "network:allow" || a[0].Decision != "deny" || a[0].Scope != "acme" {
		t.Errorf("audit row %+v", a)
	}
	for _, h := range []string{"93.184.216.34:443", "api.example.com", "10.9.0.7:8080", "10.9.1.0/24"} {
		if _, err := l.SetNetworkRule(tenant, store.NetworkRule{Folder: "acme", Host: h, Effect: "allow"}); err != nil {
			t.Errorf("%s: %v", h, err)
		}
	}
	// A deny rule narrows and is always the tenant's to write.
	if _, err := l.SetNetworkRule(admin, store.NetworkRule{Folder: "acme", Host: "127.0.0.1", Effect: "deny"}); err != nil {
		t.Errorf("deny 127.0.0.1: %v", err)
	}
	eff, err := l.EffectiveAllowlist(context.Background(), "acme")
	if err != nil || strings.Join(eff, " ") != "10.9.0.7:8080 10.9.1.0/24 93.184.216.34:443 api.example.com" {
		t.Errorf("effective %v %v", eff, err)
	}
}
