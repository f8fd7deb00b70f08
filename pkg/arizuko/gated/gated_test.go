package gated

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

type fixture struct {
	l    *service.Local
	st   *store.Store
	srv  *Server
	data string
	ctx  context.Context // admin
	msgs []string        // folders woken by OnMessage
}

func newFixture(t *testing.T, folders ...string) *fixture {
	t.Helper()
	e := servicetest.New(t, servicetest.Options{})
	l, data := e.L, e.Data
	f := &fixture{l: l, st: e.Store, data: data, ctx: e.Admin}
	for _, p := range folders {
		e.AddFolder(t, p, "agent")
	}
	f.srv = New(Options{Store: l.Store(), Gate: l.Gate(), Control: l, DataDir: data,
		OnMessage: func(folder, _ string) { f.msgs = append(f.msgs, folder) }})
	return f
}

func (f *fixture) grant(t *testing.T, principal, action, scope string, eff acl.Effect) {
	t.Helper()
	if _, err := f.l.AddGrant(f.ctx, acl.Grant{Principal: principal, Action: action, Scope: scope, Effect: eff}); err != nil {
		t.Fatal(err)
	}
}

// connect binds the folder's socket for turn and returns an MCP client
// session over a real unix socket.
func (f *fixture) connect(t *testing.T, turn Turn) *mcp.ClientSession {
	t.Helper()
	ln, err := f.srv.Listen(context.Background(), turn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	if ln.Path() != filepath.Join(f.data, "ipc", filepath.FromSlash(turn.Folder), "gated.sock") {
		t.Fatalf("socket at %s", ln.Path())
	}
	c, err := net.Dial("unix", ln.Path())
	if err != nil {
		t.Fatal(err)
	}
	cl := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := cl.Connect(context.Background(), &mcp.IOTransport{Reader: c, Writer: c}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error %v", name, err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), res.IsError
}

func toolNames(t *testing.T, cs *mcp.ClientSession) []string {
	t.Helper()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, tl := range res.Tools {
		out = append(out, tl.Name)
	}
	slices.Sort(out)
	return out
}

func TestReplyAllowedBySeedAndQueued(t *testing.T) {
	f := newFixture(t, "corp")
	if _, _, err := f.st.PutMessage(context.Background(), store.Message{ChatJID: "tg:1", Platform: "tg", Text: "hi", Folder: "corp"}); err != nil {
		t.Fatal(err)
	}
	cs := f.connect(t, Turn{Folder: "corp", TurnID: 7, ChatJID: "tg:1", Engage: true})
	text, isErr := call(t, cs, "reply", map[string]any{"text": "hello back"})
	if isErr {
		t.Fatalf("reply denied: %s", text)
	}
	outs, err := f.st.TurnOutbound(context.Background(), 7)
	if err != nil || len(outs) != 1 {
		t.Fatalf("outbound %v %v", outs, err)
	}
	if o := outs[0]; o.ChatJID != "tg:1" || o.Platform != "tg" || o.Text != "hello back" || o.Status != "pending" || o.Folder != "corp" {
		t.Fatalf("outbound row %+v", o)
	}
	c, _ := f.st.GetChat(context.Background(), "tg:1")
	if c.EngagedFolder != "corp" {
		t.Fatalf("engagement %+v", c)
	}
}

func TestDeniedCallIsAnErrorAndAudited(t *testing.T) {
	f := newFixture(t, "corp", "corp/eng")
	cs := f.connect(t, Turn{Folder: "corp", TurnID: 1, ChatJID: "tg:1"})
	text, isErr := call(t, cs, "delegate_group", map[string]any{"folder": "corp/eng", "prompt": "do it", "chat_jid": "tg:1"})
	if !isErr || !strings.Contains(text, "permission denied") || !strings.Contains(text, "mcp:delegate_group") {
		t.Fatalf("want a readable denial, got isErr=%v %q", isErr, text)
	}
	audit, err := f.st.ListAudit(context.Background(), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) == 0 || audit[0].Principal != "folder:corp" || audit[0].Action != "mcp:delegate_group" ||
		audit[0].Scope != "corp/eng" || audit[0].Decision != "deny" {
		t.Fatalf("audit %+v", audit)
	}
	if len(f.msgs) != 0 {
		t.Fatalf("denied delegate woke %v", f.msgs)
	}
	// An explicit deny beats an operator-wide allow.
	f.grant(t, "folder:corp", "mcp:*", "corp/**", acl.Allow)
	f.grant(t, "folder:corp", "mcp:send", "corp", acl.Deny)
	if text, isErr := call(t, cs, "send", map[string]any{"chat_jid": "tg:2", "text": "x"}); !isErr {
		t.Fatalf("send allowed despite deny: %s", text)
	}
}

func TestDelegateWithGrantWritesChildMessage(t *testing.T) {
	f := newFixture(t, "corp", "corp/eng")
	f.grant(t, "folder:corp", "mcp:delegate_group", "corp/*", acl.Allow)
	cs := f.connect(t, Turn{Folder: "corp", TurnID: 1, Depth: 0, ChatJID: "tg:1"})
	if text, isErr := call(t, cs, "delegate_group", map[string]any{"folder": "corp/eng", "prompt": "build it", "chat_jid": "tg:1"}); isErr {
		t.Fatalf("delegate: %s", text)
	}
	msgs, err := f.st.PendingInbound(context.Background(), "corp/eng", "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "build it" || msgs[0].ChatJID != "tg:1" || msgs[0].Sender != "folder:corp" {
		t.Fatalf("child inbox %+v %v", msgs, err)
	}
	if !slices.Equal(f.msgs, []string{"corp/eng"}) {
		t.Fatalf("woken %v", f.msgs)
	}
	turn, _ := f.st.CreateTurn(context.Background(), "corp/eng", "", msgs[0].ID, msgs[0].ID)
	if turn.Depth != 1 {
		t.Fatalf("child turn depth %d, want 1", turn.Depth)
	}
	// The host bounds the chain, whatever the agent asks.
	deep := f.connect(t, Turn{Folder: "corp", TurnID: 2, Depth: DefaultMaxDepth, ChatJID: "tg:1"})
	if text, isErr := call(t, deep, "delegate_group", map[string]any{"folder": "corp/eng", "prompt": "again", "chat_jid": "tg:1"}); !isErr || !strings.Contains(text, "deep") {
		t.Fatalf("depth not bounded: %s", text)
	}
}

func TestToolsListFilteredByGrants(t *testing.T) {
	f := newFixture(t, "corp", "corp/eng")
	cs := f.connect(t, Turn{Folder: "corp/eng", TurnID: 1, ChatJID: "tg:1"})
	if got := toolNames(t, cs); !slices.Equal(got, []string{"reply", "send"}) {
		t.Fatalf("member sees %v, want reply and send", got)
	}
	f.grant(t, "folder:corp/eng", "mcp:escalate_group", "corp", acl.Allow)
	f.grant(t, "folder:corp/eng", "mcp:network_list", "{self}", acl.Allow)
	f.grant(t, "folder:corp/eng", "mcp:send", "**", acl.Deny)
	if got := toolNames(t, cs); !slices.Equal(got, []string{"escalate_group", "network_list", "reply"}) {
		t.Fatalf("after grants sees %v", got)
	}
	f.grant(t, "folder:corp/eng", "mcp:*", "**", acl.Allow)
	got := toolNames(t, cs)
	want := slices.Clone(Tools)
	want = slices.DeleteFunc(want, func(s string) bool { return s == "send" })
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("with mcp:* sees %v, want %v", got, want)
	}
}

func TestEscalateReachesParent(t *testing.T) {
	f := newFixture(t, "corp", "corp/eng")
	f.grant(t, "folder:corp/eng", "mcp:escalate_group", "corp", acl.Allow)
	cs := f.connect(t, Turn{Folder: "corp/eng", TurnID: 1, ChatJID: "tg:1"})
	if text, isErr := call(t, cs, "escalate_group", map[string]any{"prompt": "need budget", "chat_jid": "tg:1"}); isErr {
		t.Fatal(text)
	}
	msgs, _ := f.st.PendingInbound(context.Background(), "corp", "", 10)
	if len(msgs) != 1 || !strings.Contains(msgs[0].Text, "need budget") || !strings.Contains(msgs[0].Text, "corp/eng") {
		t.Fatalf("parent inbox %+v", msgs)
	}
}

func TestRegisterGroupCreatesFolderAndRoute(t *testing.T) {
	f := newFixture(t, "corp")
	f.grant(t, "folder:corp", "mcp:register_group", "corp/**", acl.Allow)
	cs := f.connect(t, Turn{Folder: "corp", TurnID: 1, ChatJID: "tg:1"})
	if text, isErr := call(t, cs, "register_group", map[string]any{"folder": "other", "chat_jid": "tg:5"}); !isErr {
		t.Fatalf("register outside own tree allowed: %s", text)
	}
	if text, isErr := call(t, cs, "register_group", map[string]any{"folder": "corp/sales", "chat_jid": "tg:5"}); isErr {
		t.Fatal(text)
	}
	if _, err := f.st.GetFolder(context.Background(), "corp/sales"); err != nil {
		t.Fatal(err)
	}
	in, err := f.l.PostMessage(f.ctx, service.MessageIn{ChatJID: "tg:5", Text: "hi"})
	if err != nil || in.Route.Folder != "corp/sales" {
		t.Fatalf("message to new chat routed to %+v %v", in.Route, err)
	}
}

func TestObserveAndNetworkAndRoutes(t *testing.T) {
	f := newFixture(t, "corp", "corp/eng", "hr")
	f.grant(t, "folder:corp", "mcp:*", "corp/**", acl.Allow)
	m, _, _ := f.st.PutMessage(context.Background(), store.Message{ChatJID: "tg:1", Text: "x", Folder: "corp"})
	turn, _ := f.st.CreateTurn(context.Background(), "corp", "", m.ID, m.ID)
	cs := f.connect(t, Turn{Folder: "corp", TurnID: turn.ID, ChatJID: "tg:1"})
	if _, isErr := call(t, cs, "observe_group", map[string]any{"source": "hr"}); !isErr {
		t.Fatal("observing a folder outside the grant was allowed")
	}
	if text, isErr := call(t, cs, "observe_group", map[string]any{"source": "corp/eng"}); isErr {
		t.Fatal(text)
	}
	if obs, _ := f.st.Observed(context.Background(), "corp"); !slices.Equal(obs, []string{"corp/eng"}) {
		t.Fatalf("observed %v", obs)
	}
	if text, isErr := call(t, cs, "network_allow", map[string]any{"host": "api.example.com"}); isErr {
		t.Fatal(text)
	}
	eff, _ := f.l.EffectiveAllowlist(context.Background(), "corp/eng")
	if !slices.Contains(eff, "api.example.com") {
		t.Fatalf("child allowlist %v", eff)
	}
	if text, isErr := call(t, cs, "add_route", map[string]any{"seq": RegisterSeq, "match": "chat_jid=tg:2", "target": "corp/eng"}); isErr {
		t.Fatal(text)
	}
	if _, isErr := call(t, cs, "add_route", map[string]any{"seq": RegisterSeq, "match": "chat_jid=tg:3", "target": "hr"}); !isErr {
		t.Fatal("route to a folder outside the grant was allowed")
	}
	text, isErr := call(t, cs, "list_routes", nil)
	if isErr || !strings.Contains(text, `"corp/eng"`) {
		t.Fatalf("list_routes: %s", text)
	}
	if text, isErr := call(t, cs, "submit_turn", map[string]any{"status": "ok", "result": "done"}); isErr {
		t.Fatal(text)
	}
	if got, _ := f.st.GetTurn(context.Background(), turn.ID); got.Outcome != "ok: done" {
		t.Fatalf("outcome %q", got.Outcome)
	}
}

func TestSocketOnlyServesItsFolder(t *testing.T) {
	f := newFixture(t, "a", "b")
	la, err := f.srv.Listen(context.Background(), Turn{Folder: "a", TurnID: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer la.Close()
	if SocketPath(f.data, "b") == la.Path() {
		t.Fatal("two folders share a socket path")
	}
	fi, err := os.Stat(la.Path())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v %v", fi, err)
	}
	la.Close()
	if _, err := os.Stat(la.Path()); !os.IsNotExist(err) {
		t.Fatalf("socket left after close: %v", err)
	}
}

func TestSessionCap(t *testing.T) {
	f := newFixture(t, "a")
	ln, err := f.srv.Listen(context.Background(), Turn{Folder: "a", TurnID: 1, ChatJID: "tg:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range MaxSessions {
		c, err := net.Dial("unix", ln.Path())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("unix", ln.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := extra.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("connection past the cap was not closed: %v", err)
	}
}
