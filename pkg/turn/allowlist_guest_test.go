package turn

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/acl"
	"github.com/crackbox/crackbox/pkg/folder"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/jailtest"
	"github.com/crackbox/crackbox/pkg/service/servicetest"
	"github.com/crackbox/crackbox/pkg/store"
)

// hostProbe is acme's agent: it fetches the host's loopback-only service
// through the turn's proxy (curl skips the proxy for 127.0.0.1 unless
// told), then lets the scripted agent call the tool the
// message names.
const hostProbe = `curl -sS --noproxy '' -x "$HTTP_PROXY" -o $HOME/body.txt -D $HOME/head.txt -w 'CHECK host %%{http_code}\n' http://127.0.0.1:%d/ > $HOME/out.txt 2>&1
exec python3 %s/agent.py`

// A tenant holding network:allow on its own folder, in a real guest: its
// agent's network_allow of a loopback address is refused and audited, and a
// loopback literal already on its list (stored by an older arizuko) opens
// nothing: the guest gets the proxy's 403 with its reason, never the host
// service's body, and the operator's audit log names the attempt.
func TestGuestTenantAllowlistKeepsHostShut(t *testing.T) {
	jenv := jailtest.Require(t)
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "host-only service body")
	}))
	defer svc.Close()
	var port int
	fmt.Sscanf(svc.URL, "http://127.0.0.1:%d", &port)

	e := newEnv(t, "")
	ctx := context.Background()
	if _, err := e.l.AddFolder(e.ctx, store.Folder{Path: "acme", AgentCommand: []string{"sh", "-c", fmt.Sprintf(hostProbe, port, DefaultGuestHome)}}); err != nil {
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
	if err := e.st.SetNetworkRule(ctx, store.NetworkRule{Folder: "acme", Host: fmt.Sprintf("127.0.0.1:%d", port), Effect: "allow"}); err != nil {
		t.Fatal(err)
	}
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 5 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:acme", fmt.Sprintf(`TRY network_allow {"folder": "acme", "host": "127.0.0.1:%d"}`, port+1))
	tr := e.waitTurns(t, "acme", 1)[0]
	out, _ := os.ReadFile(filepath.Join(home, "out.txt"))
	head, _ := os.ReadFile(filepath.Join(home, "head.txt"))
	body, _ := os.ReadFile(filepath.Join(home, "body.txt"))
	t.Logf("turn %+v\nout %s\nhead %s\nbody %s", tr, out, head, body)
	if !strings.Contains(string(out), "CHECK host 403") || !strings.Contains(string(head), "X-Crackbox-Error: blocked-private-address") ||
		strings.Contains(string(body), "host-only") {
		t.Errorf("the guest reached the host's loopback service")
	}
	outs, _ := e.st.TurnOutbound(ctx, tr.ID)
	if len(outs) != 1 || !strings.HasPrefix(outs[0].Text, "denied: ") || !strings.Contains(outs[0].Text, "allow_cidrs") {
		t.Errorf("network_allow reply %+v", outs)
	}
	audit, _ := e.st.ListAudit(ctx, 20)
	var tool, connect bool
	for _, a := range audit {
		tool = tool || a.Principal == "folder:acme" && a.Action == "network:allow" && a.Decision == "deny"
		connect = connect || a.Principal == "folder:acme" && a.Action == "network:connect" && a.Decision == "deny" &&
			strings.Contains(a.Reason, fmt.Sprintf("127.0.0.1:%d", port))
	}
	if !tool || !connect {
		t.Errorf("audit rows (tool %v, connect %v): %+v", tool, connect, audit)
	}
	if rules, _ := e.st.NetworkRules(ctx, "acme"); len(rules) != 1 {
		t.Errorf("rules %+v, want only the stored one", rules)
	}
}
