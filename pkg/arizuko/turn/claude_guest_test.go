package turn

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
)

// TestGuestClaudeCodeFolder: a folder set up like examples/agents/claude-code runs a
// turn in a real guest in which Claude Code (installed on the host from the npm
// registry by scripts/deps.sh) starts, and the example's stdio bridge, started from
// the example's mcp.json as Claude Code would, lists the folder's MCP tools and
// replies through them. Its API key is injected as setup.sh grants it: the
// guest holds only the placeholder.
func TestGuestClaudeCodeFolder(t *testing.T) {
	jenv := jailtest.Require(t)
	claude, err := exec.LookPath("claude")
	if err != nil {
		t.Fatalf("claude not installed on the host (scripts/deps.sh installs it: npm install -g @anthropic-ai/claude-code): %v", err)
	}
	hostVer, err := exec.Command(claude, "--version").Output()
	if err != nil {
		t.Fatalf("claude --version on the host: %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	here := filepath.Dir(file)
	example := filepath.Join(here, "..", "..", "..", "examples", "agents", "claude-code")

	e := newEnv(t, "")
	if _, err := e.l.AddFolder(e.ctx, store.Folder{Path: "cc", AgentCommand: []string{"python3", DefaultGuestHome + "/check.py"}}); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(e.data, "homes", folder.HomeName("cc"))
	copyFile(t, filepath.Join(here, "testdata", "claude_bridge.py"), filepath.Join(home, "check.py"))
	copyFile(t, filepath.Join(example, "mcp.json"), filepath.Join(home, ".arizuko", "mcp.json"))
	copyFile(t, filepath.Join(example, "stdio-bridge.py"), filepath.Join(home, ".arizuko", "stdio-bridge.py"))
	// The credential as setup.sh stores and grants it.
	if err := e.l.SetSecret(e.ctx, service.SecretIn{Scope: "folder:cc", Name: "ANTHROPIC_API_KEY", Value: "sk-ant-never-in-the-guest"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:cc", Action: "inject:ANTHROPIC_API_KEY@api.anthropic.com", Scope: "cc", Effect: acl.Allow}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.l.SetNetworkRule(e.ctx, store.NetworkRule{Folder: "cc", Host: "api.anthropic.com", Effect: "allow"}); err != nil {
		t.Fatal(err)
	}

	runner := &slotRunner{inner: &JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 10 * time.Minute, UID: -1, GID: -1}}
	e.start(t, runner, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:cc", "hello")

	ctx := context.Background()
	var ts []store.Turn
	if !eventually.Within(11*time.Minute, func() bool {
		if ts, err = e.st.ListTurns(ctx, "cc", 10); err != nil {
			t.Fatal(err)
		}
		return len(ts) > 0 && (ts[0].Status == store.TurnDone || ts[0].Status == store.TurnFailed)
	}) {
		t.Fatalf("the turn did not end: %+v", ts)
	}
	outs, _ := e.st.TurnOutbound(ctx, ts[0].ID)
	if ts[0].Status != store.TurnDone || len(outs) != 1 {
		t.Fatalf("turn %+v outbound %+v", ts[0], outs)
	}
	got := outs[0].Text
	t.Logf("reply: %s", got)
	if want := "claude=" + strings.TrimSpace(string(hostVer)) + " "; !strings.HasPrefix(got, want) {
		t.Errorf("reply %q: want Claude Code's version as on the host, %q", got, want)
	}
	if !strings.Contains(got, " key=crackbox-secret- ") {
		t.Errorf("reply %q: the guest's ANTHROPIC_API_KEY is not the injection placeholder", got)
	}
	tools := ""
	if _, after, ok := strings.Cut(got, " tools="); ok {
		tools = "," + after + ","
	}
	for _, want := range []string{"reply", "send"} {
		if !strings.Contains(tools, ","+want+",") {
			t.Errorf("reply %q: the bridge did not list the %s tool", got, want)
		}
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
