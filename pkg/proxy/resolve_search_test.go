package proxy

import (
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/internal/testreq"
)

const searchChildEnv = "CRACKBOX_PROXY_SEARCH_CHILD"

// TestResolveIgnoresSearchDomains reruns itself in a private mount namespace
// whose /etc/resolv.conf has "search corp.internal" and whose /etc/hosts
// names hostsfile.test, so the host's real files stay untouched.
func TestResolveIgnoresSearchDomains(t *testing.T) {
	if os.Getenv(searchChildEnv) == "1" {
		searchChild(t)
		return
	}
	testreq.Root(t, "bind-mounts resolv.conf and hosts in a mount namespace")
	testreq.Command(t, "unshare", "util-linux")
	dir := t.TempDir()
	resolv := filepath.Join(dir, "resolv.conf")
	hosts := filepath.Join(dir, "hosts")
	if err := os.WriteFile(resolv, []byte("nameserver 127.0.0.1\nsearch corp.internal\noptions ndots:1 timeout:1 attempts:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hosts, []byte("127.0.0.1 localhost\n93.184.215.50 hostsfile.test\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		`mount --bind "$1" /etc/resolv.conf && mount --bind "$2" /etc/hosts && exec "$3" -test.run '^TestResolveIgnoresSearchDomains$' -test.v`,
		"sh", resolv, hosts, os.Args[0])
	cmd.Env = append(os.Environ(), searchChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child in mount namespace: %v\n%s", err, out)
	}
	t.Logf("child:\n%s", out)
}

func searchChild(t *testing.T) {
	pub := netip.MustParseAddr("93.184.215.9")
	resolver := nettest.DNS(t, map[string][]netip.Addr{
		"public.test":            {pub},
		"intranet.corp.internal": {pub},
		"up.test.corp.internal":  {pub},
	})

	ctx := context.Background()
	p, err := New(Options{Resolver: resolver}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := p.Resolve(ctx, "public.test"); err != nil || len(got) != 1 || got[0] != pub {
		t.Fatalf("public.test: %v %v", got, err)
	}
	// Only the search-suffixed forms exist; an absolute lookup must miss.
	for _, h := range []string{"intranet", "up.test"} {
		if got, err := p.Resolve(ctx, h); err == nil {
			t.Errorf("Resolve(%s) = %v: the search domain was applied", h, got)
		}
	}

	// The system resolver still answers from /etc/hosts for the absolute name.
	sys, err := New(Options{}, NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if got, err := sys.Resolve(ctx, "hostsfile.test"); err != nil || len(got) != 1 || got[0] != netip.MustParseAddr("93.184.215.50") {
		t.Errorf("hostsfile.test via /etc/hosts: %v %v", got, err)
	}
}
