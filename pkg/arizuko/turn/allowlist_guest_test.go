package turn

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// hostProbe is acme's agent: it fetches three host services through the
// turn's proxy (curl skips the proxy for loopback unless told), then lets
// the scripted agent call the tool the message names.
const hostProbe = `for t in host:%s daemon:%s opened:%s; do
  n=${t%%%%:*}; a=${t#*:}
  curl -sS --noproxy '' -x "$HTTP_PROXY" -o $HOME/body-$n.txt -D $HOME/head-$n.txt -w "CHECK $n %%{http_code}\n" http://$a/ >> $HOME/out.txt 2>&1
done
exec python3 %s/agent.py`

// loopbackService serves body on addr (a loopback address, port 0).
func loopbackService(t *testing.T, addr, body string) string {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv := &httptest.Server{Listener: ln, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, body)
	})}}
	srv.Start()
	t.Cleanup(srv.Close)
	return ln.Addr().String()
}

// A tenant holding network:allow on its own folder, in a real guest. Its
// agent's network_allow of a loopback address is refused and audited. Of
// three loopback literals already on its list (stored by an older
// arizuko): the host's service outside the operator's allow_cidrs gets the
// proxy's 403 with its reason; the daemon's own listener gets it too though
// allow_cidrs covers its address; only the service the operator opened
// answers. Each refusal is a row of the operator's audit log.
func TestGuestTenantAllowlistKeepsHostShut(t *testing.T) {
	jenv := jailtest.Require(t)
	host := loopbackService(t, "127.0.0.1:0", "host-only service body")
	daemon := loopbackService(t, "127.0.0.2:0", "daemon api body")
	opened := loopbackService(t, "127.0.0.3:0", "operator opened this")

	e := newEnv(t, "")
	ctx := context.Background()
	argv := []string{"sh", "-c", fmt.Sprintf(hostProbe, host, daemon, opened, DefaultGuestHome)}
	if _, err := e.l.AddFolder(e.ctx, store.Folder{Path: "acme", AgentCommand: argv}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(e.data, "homes", folder.HomeName("acme"))
	agent, err := os.ReadFile(servicetest.AgentScript(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "agent.py"), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:acme", Action: "mcp:network_allow", Scope: "acme", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{host, daemon, opened} {
		if err := e.st.SetNetworkRule(ctx, store.NetworkRule{Folder: "acme", Host: a, Effect: "allow"}); err != nil {
			t.Fatal(err)
		}
	}
	popts := proxy.Options{
		AllowCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32"), netip.MustParsePrefix("127.0.0.3/32")},
		Refuse:     []netip.AddrPort{netip.MustParseAddrPort(daemon)},
	}
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 5 * time.Minute, UID: -1, GID: -1, Proxy: popts}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:acme", `TRY network_allow {"folder": "acme", "host": "127.0.0.1:9"}`)
	tr := e.waitTurns(t, "acme", 1)[0]
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(home, name))
		return string(b)
	}
	out := read("out.txt")
	t.Logf("turn %+v\n%s", tr, out)
	for _, c := range []struct{ name, status, body string }{
		{"host", "403", "host-only"}, {"daemon", "403", "daemon api"}, {"opened", "200", "operator opened this"},
	} {
		head, body := read("head-"+c.name+".txt"), read("body-"+c.name+".txt")
		switch {
		case !strings.Contains(out, "CHECK "+c.name+" "+c.status):
			t.Errorf("%s: want %s", c.name, c.status)
		case c.status == "403" && (!strings.Contains(head, "X-Crackbox-Error: blocked-private-address") || strings.Contains(body, c.body)):
			t.Errorf("%s: the guest reached it or got no reason:\n%s%s", c.name, head, body)
		case c.status == "200" && body != c.body:
			t.Errorf("%s: body %q", c.name, body)
		}
	}
	outs, _ := e.st.TurnOutbound(ctx, tr.ID)
	if len(outs) != 1 || !strings.HasPrefix(outs[0].Text, "denied: ") || !strings.Contains(outs[0].Text, "allow_cidrs") {
		t.Errorf("network_allow reply %+v", outs)
	}
	audit, _ := e.st.ListAudit(ctx, 20)
	tool, connect := false, map[string]bool{}
	for _, a := range audit {
		tool = tool || a.Principal == "folder:acme" && a.Action == "network:allow" && a.Decision == "deny"
		for _, d := range []string{host, daemon, opened} {
			if a.Principal == "folder:acme" && a.Action == "network:connect" && a.Decision == "deny" && strings.Contains(a.Reason, "refused "+d+":") {
				connect[d] = true
			}
		}
	}
	if !tool || !connect[host] || !connect[daemon] || connect[opened] {
		t.Errorf("audit rows (tool %v, connect %v): %+v", tool, connect, audit)
	}
	if rules, _ := e.st.NetworkRules(ctx, "acme"); len(rules) != 3 {
		t.Errorf("rules %+v, want only the stored three", rules)
	}
}
