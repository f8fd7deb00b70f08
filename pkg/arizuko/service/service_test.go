package service

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
)

func ringT(t testing.TB, keys ...string) *secrets.Ring {
	t.Helper()
	var raw [][]byte
	for _, k := range keys {
		b, err := secrets.ParseKeys(k)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, b...)
	}
	r, err := secrets.NewRing(raw...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// newLocal opens a fresh data dir and returns the service and an admin context.
func newLocal(t testing.TB, ring *secrets.Ring) (*Local, context.Context) {
	t.Helper()
	dir := t.TempDir()
	l, err := Open(context.Background(), Options{DataDir: dir, Ring: ring, Create: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l, WithPrincipal(context.Background(), AdminPrincipal)
}

func mustFolders(t testing.TB, l *Local, ctx context.Context, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := l.AddFolder(ctx, store.Folder{Path: p}); err != nil {
			t.Fatal(err)
		}
	}
}

func auditCount(t *testing.T, l *Local) int {
	t.Helper()
	a, err := l.Store().ListAudit(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return len(a)
}

func TestOpenNeedsInit(t *testing.T) {
	_, err := Open(context.Background(), Options{DataDir: t.TempDir()})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
}

// TestEveryDenialAudited drives each kind of authorization through the
// service as an unprivileged user and checks one audit row per denial.
func TestEveryDenialAudited(t *testing.T) {
	l, admin := newLocal(t, ringT(t, secrets.GenerateKey()))
	mustFolders(t, l, admin, "corp", "corp/eng")
	if _, err := l.AddGrant(admin, acl.Grant{Principal: "user:dev", Action: "folder:add", Scope: "corp/eng/**", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	dev := WithPrincipal(context.Background(), "user:dev")
	anon := context.Background()
	if _, err := l.AddFolder(dev, store.Folder{Path: "corp/eng/sre"}); err != nil {
		t.Fatalf("granted add failed: %v", err)
	}
	before := auditCount(t, l)
	denied := []struct {
		name string
		call func() error
	}{
		{"folder outside scope", func() error { _, err := l.AddFolder(dev, store.Folder{Path: "corp/sales"}); return err }},
		{"folder rm", func() error { return l.RemoveFolder(dev, "corp/eng/sre") }},
		{"folder ls", func() error { _, err := l.ListFolders(dev); return err }},
		{"route add", func() error { _, err := l.AddRoute(dev, router.Route{Target: "corp/eng"}); return err }},
		{"grant escalation", func() error {
			_, err := l.AddGrant(dev, acl.Grant{Principal: "user:dev", Action: "*", Scope: "**", Effect: acl.Allow})
			return err
		}},
		{"self-membership in operator", func() error { return l.AddMember(dev, acl.Edge{Member: "user:dev", Role: "role:operator"}) }},
		{"network", func() error {
			_, err := l.SetNetworkRule(dev, store.NetworkRule{Folder: "corp/eng", Host: "evil.com", Effect: "allow"})
			return err
		}},
		{"secret set", func() error { return l.SetSecret(dev, SecretIn{Scope: "folder:corp/eng", Name: "K", Value: "v"}) }},
		{"secret ls", func() error { _, err := l.ListSecrets(dev, ""); return err }},
		{"rotate", func() error { _, err := l.RotateSecrets(dev); return err }},
		{"message post", func() error { _, err := l.PostMessage(dev, MessageIn{ChatJID: "web:corp", Text: "x"}); return err }},
		{"anonymous", func() error { _, err := l.ListRoutes(anon); return err }},
	}
	for i, c := range denied {
		err := c.call()
		if !errors.Is(err, acl.ErrDenied) || Code(err) != CodeDenied {
			t.Fatalf("%s: err = %v, want denied", c.name, err)
		}
		if got := auditCount(t, l) - before; got != i+1 {
			t.Fatalf("%s: %d audit rows after %d denials", c.name, got, i+1)
		}
	}
	a, _ := l.Store().ListAudit(context.Background(), 1)
	if a[0].Principal != "anonymous:" || a[0].Decision != "deny" || a[0].Action != "route:read" {
		t.Fatalf("last audit row %+v", a[0])
	}
}

func TestDelegationThroughService(t *testing.T) {
	l, admin := newLocal(t, nil)
	mustFolders(t, l, admin, "corp", "corp/eng", "corp/sales")
	if _, err := l.AddGrant(admin, acl.Grant{Principal: "user:lead", Action: "route:*", Scope: "corp/eng/**", Effect: acl.Allow, GrantOption: true}); err != nil {
		t.Fatal(err)
	}
	lead := WithPrincipal(context.Background(), "user:lead")
	g, err := l.AddGrant(lead, acl.Grant{Principal: "user:dev", Action: "route:add", Scope: "corp/eng", Effect: acl.Allow})
	if err != nil {
		t.Fatalf("subset grant: %v", err)
	}
	if g.GrantedBy != "user:lead" {
		t.Fatalf("granted_by = %q", g.GrantedBy)
	}
	for _, bad := range []acl.Grant{
		{Principal: "user:dev", Action: "route:add", Scope: "corp/**", Effect: acl.Allow},
		{Principal: "user:dev", Action: "route:add", Scope: "corp/eng", Effect: acl.Deny},
		{Principal: "user:dev", Action: "folder:add", Scope: "corp/eng", Effect: acl.Allow},
	} {
		if _, err := l.AddGrant(lead, bad); !errors.Is(err, acl.ErrDenied) {
			t.Errorf("AddGrant(%+v) = %v, want denied", bad, err)
		}
	}
	dev := WithPrincipal(context.Background(), "user:dev")
	// A right on part of the tree adds a route for one chat at a tenant's seq.
	if _, err := l.AddRoute(dev, router.Route{Seq: TenantRouteSeq, Match: "chat_jid=tg:1", Target: "corp/eng#x"}); err != nil {
		t.Fatalf("delegated right: %v", err)
	}
	if _, err := l.AddRoute(dev, router.Route{Seq: 1, Target: "corp/sales"}); !errors.Is(err, acl.ErrDenied) {
		t.Fatalf("outside delegated scope: %v", err)
	}
	// {sender} targets need a glob scope covering any sender.
	if _, err := l.AddRoute(lead, router.Route{Seq: TenantRouteSeq, Match: "chat_jid=tg:2", Target: "corp/eng/{sender}"}); err != nil {
		t.Fatalf("lead covers corp/eng/*: %v", err)
	}
	if _, err := l.AddRoute(dev, router.Route{Target: "corp/eng/{sender}"}); !errors.Is(err, acl.ErrDenied) {
		t.Fatalf("dev holds corp/eng only: %v", err)
	}
	if err := l.RemoveGrant(dev, g.ID); !errors.Is(err, acl.ErrDenied) {
		t.Fatalf("dev removing its own grant: %v", err)
	}
	if err := l.RemoveGrant(lead, g.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AddRoute(dev, router.Route{Seq: 1, Target: "corp/eng"}); !errors.Is(err, acl.ErrDenied) {
		t.Fatalf("revoked grant still works: %v", err)
	}
}

func TestFolderPathEscapes(t *testing.T) {
	l, admin := newLocal(t, nil)
	mustFolders(t, l, admin, "corp")
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(l.DataDir(), "folders", "corp", "link")); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"..", "../etc", "/etc", "corp/../..", "corp/link", "corp/./x", "corp\\x", "a\x00b", "*", "corp/**"} {
		_, err := l.AddFolder(admin, store.Folder{Path: name})
		if err == nil || Code(err) != CodeInvalid {
			t.Errorf("AddFolder(%q) = %v, want invalid", name, err)
		}
	}
	if _, err := l.Store().GetFolder(context.Background(), "corp/link"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("row created for a symlinked folder: %v", err)
	}
	if e, _ := os.ReadDir(outside); len(e) != 0 {
		t.Fatalf("created outside: %v", e)
	}
}

func TestNetworkInheritance(t *testing.T) {
	l, admin := newLocal(t, nil)
	mustFolders(t, l, admin, "corp", "corp/eng", "corp/eng/sre", "corpx")
	set := func(f, h, eff string) {
		t.Helper()
		if _, err := l.SetNetworkRule(admin, store.NetworkRule{Folder: f, Host: h, Effect: eff}); err != nil {
			t.Fatal(err)
		}
	}
	set("corp", "GitHub.com.", "allow")
	set("corp", "*.pypi.org", "allow")
	set("corp/eng", "api.anthropic.com", "allow")
	set("corp/eng/sre", "github.com", "deny")
	set("corpx", "evil.com", "allow")
	cases := map[string][]string{
		"corp":         {"*.pypi.org", "github.com"},
		"corp/eng":     {"*.pypi.org", "api.anthropic.com", "github.com"},
		"corp/eng/sre": {"*.pypi.org", "api.anthropic.com"},
		"corpx":        {"evil.com"},
	}
	for f, want := range cases {
		got, err := l.EffectiveAllowlist(context.Background(), f)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v %v, want %v", f, got, err, want)
		}
	}
	v, err := l.ListNetwork(admin, "corp/eng/sre")
	if err != nil || len(v.Rules) != 4 || !reflect.DeepEqual(v.Effective, cases["corp/eng/sre"]) {
		t.Fatalf("view %+v %v", v, err)
	}
	for _, bad := range []string{"10.0.0.1/8", "exa mple.com", "", "*.com.*"} {
		if _, err := l.SetNetworkRule(admin, store.NetworkRule{Folder: "corp", Host: bad, Effect: "allow"}); Code(err) != CodeInvalid {
			t.Errorf("host %q: %v", bad, err)
		}
	}
	if _, err := l.SetNetworkRule(admin, store.NetworkRule{Folder: "nope", Host: "a.com", Effect: "allow"}); Code(err) != CodeNotFound {
		t.Errorf("missing folder: %v", err)
	}
}

func TestSecretsInheritAndRotate(t *testing.T) {
	k1, k2 := secrets.GenerateKey(), secrets.GenerateKey()
	l, admin := newLocal(t, ringT(t, k1))
	mustFolders(t, l, admin, "corp", "corp/eng")
	for _, s := range []SecretIn{
		{Scope: "folder:corp", Name: "TOKEN", Value: "parent-value"},
		{Scope: "folder:corp", Name: "SHARED", Value: "shared-value"},
		{Scope: "folder:corp/eng", Name: "TOKEN", Value: "child-value"},
		{Scope: "user:alice", Name: "PAT", Value: "pat-value"},
	} {
		if err := l.SetSecret(admin, s); err != nil {
			t.Fatal(err)
		}
	}
	for _, bad := range []SecretIn{
		{Scope: "folder:nope", Name: "A", Value: "x"},
		{Scope: "corp", Name: "A", Value: "x"},
		{Scope: "folder:corp", Name: "1BAD", Value: "x"},
		{Scope: "folder:corp", Name: "A-B", Value: "x"},
	} {
		if err := l.SetSecret(admin, bad); err == nil {
			t.Errorf("SetSecret(%+v) accepted", bad)
		}
	}
	got, err := l.FolderSecrets(context.Background(), "corp/eng")
	if err != nil || !reflect.DeepEqual(got, map[string]string{"TOKEN": "child-value", "SHARED": "shared-value"}) {
		t.Fatalf("inherited %v %v", got, err)
	}
	names, _ := l.ListSecrets(admin, "folder:corp")
	if len(names) != 2 {
		t.Fatalf("names %+v", names)
	}

	// Rotate: new key first, old key second.
	l.opts.Ring = ringT(t, k2, k1)
	n, err := l.RotateSecrets(admin)
	if err != nil || n != 4 {
		t.Fatalf("rotate = %d, %v", n, err)
	}
	if n, _ := l.RotateSecrets(admin); n != 0 {
		t.Fatalf("second rotate resealed %d", n)
	}
	l.opts.Ring = ringT(t, k2)
	if got, err := l.FolderSecrets(context.Background(), "corp/eng"); err != nil || got["TOKEN"] != "child-value" {
		t.Fatalf("after rotation, new key alone: %v %v", got, err)
	}
	l.opts.Ring = ringT(t, k1)
	if _, err := l.FolderSecrets(context.Background(), "corp/eng"); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("old key alone still opens: %v", err)
	}
	l.opts.Ring = nil
	if err := l.SetSecret(admin, SecretIn{Scope: "folder:corp", Name: "X", Value: "v"}); Code(err) != CodeUnavailable {
		t.Fatalf("no key: %v", err)
	}
}

func TestSecretRowSwapInDB(t *testing.T) {
	l, admin := newLocal(t, ringT(t, secrets.GenerateKey()))
	mustFolders(t, l, admin, "a", "b")
	l.SetSecret(admin, SecretIn{Scope: "folder:a", Name: "K", Value: "value-for-a"})
	l.SetSecret(admin, SecretIn{Scope: "folder:b", Name: "K", Value: "value-for-b"})
	rows, _ := l.Store().SecretRows(context.Background(), "folder", "a")
	// An attacker with write access to the database copies a's ciphertext into b's row.
	if err := l.Store().PutSecret(context.Background(), store.SecretRow{ScopeKind: "folder", ScopeID: "b", Name: "K", Value: rows[0].Value}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.FolderSecrets(context.Background(), "b"); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("moved ciphertext opened: %v", err)
	}
}

func TestPostMessageRoutingAndDedup(t *testing.T) {
	l, admin := newLocal(t, nil)
	mustFolders(t, l, admin, "corp", "users")
	l.AddRoute(admin, router.Route{Seq: 1, Match: "platform=tg", Target: "users/{sender}"})
	bob := "users/" + router.SanitizeSender("tg", "Bob!")
	out, err := l.PostMessage(admin, MessageIn{ChatJID: "tg:1", Platform: "tg", Sender: "Bob!", Text: "hi", PlatformID: "m1"})
	if err != nil || out.Route.Folder != bob || out.Message.Folder != bob || out.Duplicate {
		t.Fatalf("%+v %v", out, err)
	}
	again, err := l.PostMessage(admin, MessageIn{ChatJID: "tg:1", Platform: "tg", Sender: "Bob!", Text: "hi", PlatformID: "m1"})
	if err != nil || !again.Duplicate || again.Message.ID != out.Message.ID {
		t.Fatalf("dup %+v %v", again, err)
	}
	// The chat answered from users a minute ago: the engagement overrides the
	// route within its tenant; an engagement with corp, another tenant, never does.
	if err := l.Store().SetEngagement(context.Background(), "tg:1", "users", "", nowMillis()-60_000); err != nil {
		t.Fatal(err)
	}
	r, err := l.Resolve(admin, MessageIn{ChatJID: "tg:1", Platform: "tg", Sender: "Bob!"})
	if err != nil || r.Folder != "users" || r.How != router.Engaged {
		t.Fatalf("engaged %+v %v", r, err)
	}
	if err := l.Store().SetEngagement(context.Background(), "tg:1", "corp", "", nowMillis()-60_000); err != nil {
		t.Fatal(err)
	}
	if r, err := l.Resolve(admin, MessageIn{ChatJID: "tg:1", Platform: "tg", Sender: "Bob!"}); err != nil || r.Folder != bob || r.How != router.ByRoute {
		t.Fatalf("cross-tenant engagement %+v %v", r, err)
	}
	if _, err := l.Store().GetFolder(context.Background(), bob); err != nil {
		t.Fatalf("per-sender folder not created: %v", err)
	}
	// A direct address to a folder that does not exist is stored unrouted.
	miss, err := l.PostMessage(admin, MessageIn{ChatJID: "web:ghost", Text: "anyone?"})
	if err != nil || miss.Route.Routed() || miss.Message.Folder != "" {
		t.Fatalf("missing folder %+v %v", miss, err)
	}
	for _, bad := range []MessageIn{{Text: "no chat"}, {ChatJID: "c", Text: string(make([]byte, MaxText+1))}, {ChatJID: "c", Text: "\xff"}} {
		if _, err := l.PostMessage(admin, bad); Code(err) != CodeInvalid {
			t.Errorf("bad message accepted: %v", err)
		}
	}
}

// A ring that does not open the store is refused before anything is sealed
// or opened under it, whether the store has a key check or only older rows.
func TestWrongKeyRefused(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	k1, k2 := ringT(t, secrets.GenerateKey()), ringT(t, secrets.GenerateKey())
	open := func(r *secrets.Ring) *Local {
		l, err := Open(ctx, Options{DataDir: data, Create: true, Ring: r})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Close() })
		return l
	}
	l1 := open(k1)
	if err := l1.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	admin := WithPrincipal(ctx, AdminPrincipal)
	mustFolders(t, l1, admin, "a")
	if err := l1.SetSecret(admin, SecretIn{Scope: "folder:a", Name: "K", Value: "value-k1"}); err != nil {
		t.Fatal(err)
	}
	l2 := open(k2)
	if err := l2.CheckKey(ctx); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key: %v", err)
	}
	if err := l2.SetSecret(admin, SecretIn{Scope: "folder:a", Name: "J", Value: "value-j2"}); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("seal under a wrong key: %v", err)
	}
	// A store sealed before key checks existed: its rows decide.
	if err := l1.Store().DeleteSecret(ctx, store.KeyCheckKind, "", ""); err != nil {
		t.Fatal(err)
	}
	if err := open(k2).CheckKey(ctx); !errors.Is(err, ErrWrongKey) {
		t.Fatalf("wrong key on an older store: %v", err)
	}
	if err := open(k1).CheckKey(ctx); err != nil {
		t.Fatalf("right key: %v", err)
	}
	if names, _ := l1.ListSecrets(admin, ""); len(names) != 1 {
		t.Fatalf("listing shows the key check: %+v", names)
	}
}
