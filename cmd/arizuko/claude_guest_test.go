package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/internal/nettest"
)

// claudeKey is the model credential setup.sh seals; only the stand-in may see it.
const claudeKey = "sk-ant-standin-only-7d1f09c2"

// The README's quick start with the shipped Claude Code example, unchanged,
// against a stand-in for the model API (real TLS on loopback, reached through
// ANTHROPIC_BASE_URL, its CA given to the proxy as [proxy] upstream_ca): the
// real Claude Code in a real guest answers a chat through mcp__gated__reply
// with the key injected. Then the stand-in answers with text only: the chat
// gets the unanswered-turn notice and `arizuko send` exits non-zero, until
// the folder's stdout reply delivers Claude Code's printed answer.
func TestGuestClaudeCodeExample(t *testing.T) {
	jenv := jailtest.Require(t)
	if _, err := exec.LookPath("claude"); err != nil {
		t.Fatalf("claude not installed on the host (scripts/deps.sh installs it: npm install -g @anthropic-ai/claude-code): %v", err)
	}
	_, file, _, _ := runtime.Caller(0)
	example := filepath.Join(filepath.Dir(file), "..", "..", "examples", "agents", "claude-code")

	model := nettest.NewModelAPI(t, "api.anthropic.com")
	model.Answer = func(r nettest.ModelRequest) nettest.ModelReply {
		if strings.Contains(r.Text, "mode:tool") && slices.Contains(r.Tools, "mcp__gated__reply") {
			return nettest.ModelReply{Tool: "mcp__gated__reply", Input: map[string]any{"text": "stand-in reply through the gated tool"}}
		}
		return nettest.ModelReply{Text: "stand-in text answer"}
	}

	data, e := initData(t)
	cfg := fmt.Sprintf(`[turns]
kernel = %q
guest_init = %q
net_mode = "proxy-only"
max_concurrent_guests = 1
turn_timeout = "8m"

[proxy]
upstream_ca = %q
allow_cidrs = ["127.0.0.1/32"]

[proxy.hosts]
"api.anthropic.com" = ["127.0.0.1"]
`, jenv.Kernel, jenv.GuestInit, model.CAFile)
	if err := os.WriteFile(filepath.Join(data, "arizuko.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// setup.sh as the README runs it, with this build's arizuko on PATH.
	setup := exec.Command("sh", filepath.Join(example, "setup.sh"), "demo")
	setup.Env = append(slices.Clone(e), "ANTHROPIC_API_KEY="+claudeKey)
	for i, kv := range setup.Env {
		if p, ok := strings.CutPrefix(kv, "PATH="); ok {
			setup.Env[i] = "PATH=" + filepath.Dir(binary) + ":" + p
		}
	}
	if out, err := setup.CombinedOutput(); err != nil {
		t.Fatalf("setup.sh: %v\n%s", err, out)
	}
	// What an operator adds for a model endpoint of their own.
	mustAz(t, e, "folder", "set", "demo", "--env", "ANTHROPIC_BASE_URL=https://api.anthropic.com:"+model.Port())
	mustAz(t, e, "network", "allow", "demo", "api.anthropic.com:"+model.Port())

	// The daemon runs one guest at a time, in one machine-wide test slot.
	release, err := jailtest.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer release()
	d := startDaemon(t, e, data, "--log-level", "info")
	send := func(text string) (string, error, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 9*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, binary, "send", "web:demo", text)
		cmd.Env = e
		start := time.Now()
		out, err := cmd.Output()
		return string(out), err, time.Since(start)
	}
	report := func() {
		t.Logf("turns:\n%s", mustAz(t, e, "turns", "ls", "--folder", "demo"))
		for _, r := range model.Requests() {
			t.Logf("model request %s tools=%d tool_result=%v key ok=%v", r.Path, len(r.Tools), r.ToolResult, r.APIKey == claudeKey)
		}
	}

	out, err, took := send("mode:tool hello")
	t.Logf("turn 1 (reply tool): send took %s", took.Round(100*time.Millisecond))
	if err != nil || out != "demo> stand-in reply through the gated tool\n" {
		report()
		t.Fatalf("send through the reply tool: %v, printed %q\ndaemon:\n%s", err, out, d.logs)
	}
	offered := false
	for _, r := range model.Requests() {
		offered = offered || slices.Contains(r.Tools, "mcp__gated__reply")
		if r.APIKey != claudeKey {
			t.Errorf("the stand-in got the key %q, want the injected one", r.APIKey)
		}
	}
	if !offered {
		t.Error("no request offered the model mcp__gated__reply")
	}

	out, err, took = send("mode:text hello")
	t.Logf("turn 2 (text only): send took %s", took.Round(100*time.Millisecond))
	if err == nil || !strings.Contains(out, "demo> arizuko: demo ended its turn without answering") {
		report()
		t.Fatalf("text-only turn: send = %v, printed %q: want a non-zero exit and the notice", err, out)
	}
	show := mustAz(t, e, "turns", "show", "2")
	if !strings.Contains(show, "outcome   no reply") || !strings.Contains(show, "output of attempt 1 (exit 0") || !strings.Contains(show, "| stand-in text answer") {
		t.Errorf("turns show 2 lacks the outcome or Claude Code's output:\n%s", show)
	}

	mustAz(t, e, "folder", "set", "demo", "--stdout-reply")
	out, err, took = send("mode:text again")
	t.Logf("turn 3 (stdout reply): send took %s", took.Round(100*time.Millisecond))
	if err != nil || out != "demo> stand-in text answer\n" {
		report()
		t.Fatalf("stdout reply: send = %v, printed %q", err, out)
	}
	report()

	// The key reached the stand-in only: no turn record, output or log holds it.
	all := mustAz(t, e, "--json", "turns", "ls", "--folder", "demo") + d.logs.String()
	for id := 1; id <= 3; id++ {
		all += mustAz(t, e, "--json", "turns", "show", fmt.Sprint(id))
	}
	if strings.Contains(all, claudeKey) {
		t.Error("a turn record, its output or the daemon log holds the key")
	}
}
