package turn

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// injectValue is the sealed folder secret; no guest, record or log may hold it.
const injectValue = "sk-ant-arizuko-inject-test-41c9e07b"

// injectScript is every folder's agent: it records its environment and two
// HTTPS requests to the upstream into its home, where the test reads them.
// Without -k the request succeeds only if the proxy terminated TLS with the
// turn's CA; with -k it reaches the upstream either way.
const injectScript = `set +e
{
env | grep '^K=' | sed 's/^/ENV /'
cat /proc/[0-9]*/environ 2>/dev/null | tr '\0' '\n' | grep '^K=' | sort -u | sed 's/^/ENVIRON /'
echo "CHECK verified $(curl -sS -o $HOME/body.txt -w '%{http_code}' -H "Authorization: Bearer ${K:-none}" "https://example.com:$PORT/verified/$ARIZUKO_FOLDER?key=${K:-none}" 2>&1 | tail -1)"
echo "CHECK insecure $(curl -ksS -o /dev/null -w '%{http_code}' -H "Authorization: Bearer ${K:-none}" "https://example.com:$PORT/insecure/$ARIZUKO_FOLDER" 2>&1 | tail -1)"
} > $HOME/out.txt 2>&1
`

// Three sibling folders inherit the secret K from corp. corp/a's inject
// grant gives its guest only a placeholder and has the proxy send the value
// to the upstream, even beside a shell:env grant for the same key; corp/b,
// without the grant, gets no placeholder and no interception; corp/c's grant
// names a secret that is not set, so its turn fails with a notice and no
// guest. Nothing arizuko keeps holds the value.
func TestGuestInjectGrant(t *testing.T) {
	jenv := jailtest.Require(t)
	up := nettest.NewHTTPSEcho(t)
	port := up.Port()
	roots := up.Roots()

	e := newEnv(t, "", "corp")
	ctx := context.Background()
	logFile, err := os.Create(filepath.Join(e.data, "daemon.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for _, f := range []string{"corp/a", "corp/b", "corp/c"} {
		argv := []string{"sh", "-c", "PORT=" + fmt.Sprint(port) + "\n" + injectScript}
		if _, err := e.l.AddFolder(e.ctx, store.Folder{Path: f, AgentCommand: argv}); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.l.SetSecret(e.ctx, service.SecretIn{Scope: "folder:corp", Name: "K", Value: injectValue}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.SetNetworkRule(e.ctx, store.NetworkRule{Folder: "corp", Host: fmt.Sprintf("example.com:%d", port), Effect: "allow"}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []acl.Grant{
		{Principal: "folder:corp/a", Action: "inject:K@example.com", Scope: "corp/a"},
		{Principal: "folder:corp/a", Action: "shell:env:K", Scope: "corp/a"},
		{Principal: "folder:corp/c", Action: "inject:MISSING@example.com", Scope: "corp/c"},
	} {
		g.Effect = acl.Allow
		if _, err := e.l.AddGrant(e.ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	popts := proxy.Options{
		Hosts:         map[string][]netip.Addr{"example.com": {netip.MustParseAddr("127.0.0.1")}},
		AllowCIDRs:    []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
		UpstreamRoots: roots,
	}
	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 5 * time.Minute, UID: -1, GID: -1, Proxy: popts, Log: log}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1; o.Log = log })
	for _, f := range []string{"corp/a", "corp/b", "corp/c"} {
		e.post(t, "web:"+f, "go")
	}
	turns := map[string]store.Turn{}
	for _, f := range []string{"corp/a", "corp/b", "corp/c"} {
		turns[f] = e.waitTurns(t, f, 1)[0]
	}
	out := func(f string) string {
		b, _ := os.ReadFile(filepath.Join(e.data, "homes", folder.HomeName(f), "out.txt"))
		t.Logf("%s out.txt:\n%s", f, b)
		return string(b)
	}
	seen := up.Requests()
	t.Logf("upstream saw:\n%s", seen)

	// corp/a: a placeholder everywhere in the guest, the value at the upstream.
	if x := turns["corp/a"]; x.Status != store.TurnDone || x.ExitCode == nil || *x.ExitCode != 0 {
		t.Errorf("corp/a turn %+v", x)
	}
	a := out("corp/a")
	ph := ""
	for _, l := range strings.Split(a, "\n") {
		if v, ok := strings.CutPrefix(l, "ENV K="); ok {
			ph = v
		}
		if v, ok := strings.CutPrefix(l, "ENVIRON "); ok && !strings.HasPrefix(v, "K=crackbox-secret-") {
			t.Errorf("corp/a: a process environment holds %q", v)
		}
	}
	if !strings.HasPrefix(ph, "crackbox-secret-") {
		t.Errorf("corp/a: guest K = %q, want a placeholder", ph)
	}
	if got := parseChecks(a); got["verified"] != "200" || got["insecure"] != "200" {
		t.Errorf("corp/a checks %v, want both 200", got)
	}
	if !strings.Contains(seen, "/verified/corp/a?key="+injectValue) || !strings.Contains(seen, "Authorization: Bearer "+injectValue) {
		t.Errorf("the upstream did not receive corp/a's value")
	}
	if body, _ := os.ReadFile(filepath.Join(e.data, "homes", folder.HomeName("corp/a"), "body.txt")); !bytes.Contains(body, []byte("Bearer "+ph)) {
		t.Errorf("corp/a: the echoed header did not come back as the placeholder: %q", body)
	}

	// corp/b: no placeholder, no interception (the upstream's own certificate,
	// which the guest does not trust), nothing of the value upstream.
	b := out("corp/b")
	if strings.Contains(b, "ENV") || strings.Contains(b, "crackbox-secret-") {
		t.Errorf("corp/b's guest got a placeholder:\n%s", b)
	}
	if got := parseChecks(b); got["verified"] == "200" || got["insecure"] != "200" {
		t.Errorf("corp/b checks %v: want the verified request refused by the guest's own TLS and the insecure one to pass untouched", got)
	}
	for _, block := range strings.Split(seen, "\n\n") {
		if strings.Contains(block, "/corp/b") && strings.Contains(block, injectValue) {
			t.Errorf("corp/b's request reached the upstream with the value:\n%s", block)
		}
	}
	if !strings.Contains(seen, "/insecure/corp/b") {
		t.Errorf("corp/b's request did not reach the upstream")
	}

	// corp/c: failed for good without a guest, the chat told which secret.
	c := turns["corp/c"]
	if c.Status != store.TurnFailed || c.ExitCode != nil || !strings.Contains(c.Error, "MISSING") || !strings.Contains(c.Error, "arizuko secret set") {
		t.Errorf("corp/c turn %+v", c)
	}
	if outs, _ := e.st.TurnOutbound(ctx, c.ID); len(outs) != 1 || !strings.Contains(outs[0].Text, "MISSING") {
		t.Errorf("corp/c notice %+v", outs)
	}
	if runner.boots != 2 {
		t.Errorf("%d guests booted, want 2 (corp/c must not boot)", runner.boots)
	}

	// Records, audit rows, logs and every file of the data dir (the SQLite
	// database and its journal included) hold no value.
	audit, _ := e.st.ListAudit(ctx, 1000)
	all, _ := json.Marshal([]any{turns, audit})
	if bytes.Contains(all, []byte(injectValue)) {
		t.Error("a turn record or audit row holds the value")
	}
	logFile.Sync()
	dbs := 0
	filepath.Walk(e.data, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() || fi.Mode()&os.ModeType != 0 {
			return nil
		}
		if strings.Contains(fi.Name(), ".db") {
			dbs++
		}
		if data, _ := os.ReadFile(p); bytes.Contains(data, []byte(injectValue)) {
			t.Errorf("%s holds the value", p)
		}
		return nil
	})
	if dbs == 0 {
		t.Errorf("no SQLite file under %s: the grep above proved nothing", e.data)
	}
	if lb, _ := os.ReadFile(logFile.Name()); !bytes.Contains(lb, []byte("turn finished")) {
		t.Errorf("the daemon log was not written: the grep above proved nothing")
	}
}

// parseChecks reads "CHECK name result" lines.
func parseChecks(out string) map[string]string {
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, "CHECK "); ok {
			name, v, _ := strings.Cut(rest, " ")
			got[name] = v
		}
	}
	return got
}
