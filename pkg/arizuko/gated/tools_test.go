package gated

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// toolEnv is one tool's world: folders corp, corp/eng and hr, and a turn of caller
// answering chat tg:1.
type toolEnv struct {
	*fixture
	turn Turn
}

// toolRow is one tool's deny and allow case. The call is checked on scope for
// folder:caller; setup prepares what the tool acts on and returns its arguments; effect
// asserts what the allowed call did, given its reply.
type toolRow struct {
	caller, scope string
	setup         func(t *testing.T, e *toolEnv) map[string]any
	effect        func(t *testing.T, e *toolEnv, reply string)
}

// toolRows has one row per entry of Tools; TestEveryToolDeniedWithoutGrant fails for a
// tool without one.
var toolRows = map[string]toolRow{
	"reply": {"corp", "corp", func(*testing.T, *toolEnv) map[string]any { return map[string]any{"text": "hello back"} },
		func(t *testing.T, e *toolEnv, _ string) {
			wantOutbound(t, e, "tg:1", "hello back")
		}},
	"send": {"corp", "corp",
		func(t *testing.T, e *toolEnv) map[string]any {
			addRoute(t, e, "chat_jid=tg:2", "corp") // send reaches chats routed to the folder
			return map[string]any{"chat_jid": "tg:2", "text": "hi two"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			wantOutbound(t, e, "tg:2", "hi two")
		}},
	"edit_message": {"corp", "corp",
		func(t *testing.T, e *toolEnv) map[string]any {
			o, err := e.st.PutOutbound(context.Background(), store.Outbound{ChatJID: "tg:1", Platform: "tg", Folder: "corp", Text: "helo", TurnID: 99})
			if err != nil {
				t.Fatal(err)
			}
			return map[string]any{"id": o.ID, "text": "hello"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			outs, err := e.st.TurnOutbound(context.Background(), e.turn.TurnID)
			if err != nil || len(outs) != 1 || outs[0].EditOf == 0 || outs[0].Text != "hello" || outs[0].ChatJID != "tg:1" {
				t.Fatalf("outbound %+v %v, want one edit of the message to tg:1", outs, err)
			}
		}},
	"delegate_group": {"corp", "corp/eng",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"folder": "corp/eng", "prompt": "build it", "chat_jid": "tg:1"}
		},
		func(t *testing.T, e *toolEnv, _ string) { wantInbox(t, e, "corp/eng", "build it") }},
	"escalate_group": {"corp/eng", "corp",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"prompt": "need budget", "chat_jid": "tg:1"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			wantInbox(t, e, "corp", "[escalated from corp/eng] need budget")
		}},
	"observe_group": {"corp", "corp/eng",
		func(*testing.T, *toolEnv) map[string]any { return map[string]any{"source": "corp/eng"} },
		func(t *testing.T, e *toolEnv, _ string) { wantObserved(t, e, "corp/eng") }},
	"unobserve_group": {"corp", "corp/eng",
		func(t *testing.T, e *toolEnv) map[string]any {
			if err := e.st.AddObserver(context.Background(), "corp", "corp/eng"); err != nil {
				t.Fatal(err)
			}
			return map[string]any{"source": "corp/eng"}
		},
		func(t *testing.T, e *toolEnv, _ string) { wantObserved(t, e) }},
	"register_group": {"corp", "corp/sales",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"folder": "corp/sales", "chat_jid": "tg:5"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			if _, err := e.st.GetFolder(context.Background(), "corp/sales"); err != nil {
				t.Fatalf("corp/sales not created: %v", err)
			}
			wantRoute(t, e, "chat_jid=tg:5", "corp/sales", true)
		}},
	"fork_topic": {"corp", "corp",
		func(t *testing.T, e *toolEnv) map[string]any {
			if err := e.st.InsertSession(context.Background(), store.Session{Folder: "corp", Topic: "main", SessionID: "s-parent"}); err != nil {
				t.Fatal(err)
			}
			dir, err := SessionDir(e.data, "corp", "s-parent")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o750); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte("parent state"), 0o640); err != nil {
				t.Fatal(err)
			}
			return map[string]any{"parent": "main", "child": "side"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			s, err := e.st.GetSession(context.Background(), "corp", "side")
			if err != nil || s.ParentTopic != "main" || s.SessionID == "s-parent" {
				t.Fatalf("forked session %+v %v", s, err)
			}
			dir, _ := SessionDir(e.data, "corp", s.SessionID)
			if b, err := os.ReadFile(filepath.Join(dir, "state.json")); string(b) != "parent state" {
				t.Fatalf("forked state %q %v", b, err)
			}
		}},
	"network_allow": {"corp", "corp/eng",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"host": "api.example.com", "folder": "corp/eng"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			if eff, _ := e.l.EffectiveAllowlist(context.Background(), "corp/eng"); !slices.Contains(eff, "api.example.com") {
				t.Fatalf("allowlist %v lacks api.example.com", eff)
			}
		}},
	"network_deny": {"corp", "corp/eng",
		func(t *testing.T, e *toolEnv) map[string]any {
			if err := e.st.SetNetworkRule(context.Background(), store.NetworkRule{Folder: "corp", Host: "api.example.com", Effect: "allow"}); err != nil {
				t.Fatal(err)
			}
			return map[string]any{"host": "api.example.com", "folder": "corp/eng"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			if eff, _ := e.l.EffectiveAllowlist(context.Background(), "corp/eng"); slices.Contains(eff, "api.example.com") {
				t.Fatalf("allowlist %v still has the host denied below corp", eff)
			}
		}},
	"network_list": {"corp", "corp/eng",
		func(t *testing.T, e *toolEnv) map[string]any {
			if err := e.st.SetNetworkRule(context.Background(), store.NetworkRule{Folder: "corp/eng", Host: "listed.example", Effect: "allow"}); err != nil {
				t.Fatal(err)
			}
			return map[string]any{"folder": "corp/eng"}
		},
		func(t *testing.T, _ *toolEnv, reply string) {
			if !strings.Contains(reply, "listed.example") {
				t.Fatalf("network_list reply lacks the rule: %s", reply)
			}
		}},
	"list_routes": {"corp", "corp",
		func(t *testing.T, e *toolEnv) map[string]any {
			addRoute(t, e, "platform=tg", "corp/eng")
			addRoute(t, e, "platform=mail", "hr")
			return nil
		},
		func(t *testing.T, _ *toolEnv, reply string) {
			if !strings.Contains(reply, `"corp/eng"`) || strings.Contains(reply, `"hr"`) {
				t.Fatalf("list_routes reply: want corp/eng's route and not hr's: %s", reply)
			}
		}},
	"add_route": {"corp", "corp/eng",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"seq": RegisterSeq, "match": "chat_jid=irc:eng", "target": "corp/eng"}
		},
		func(t *testing.T, e *toolEnv, _ string) { wantRoute(t, e, "chat_jid=irc:eng", "corp/eng", true) }},
	"delete_route": {"corp", "corp/eng",
		func(t *testing.T, e *toolEnv) map[string]any {
			// A tenant removes only a route it added: this one corp's agent did.
			r, err := e.st.InsertRoute(context.Background(), router.Route{Seq: RegisterSeq, Match: "chat_jid=irc:eng", Target: "corp/eng", Owner: "folder:corp"})
			if err != nil {
				t.Fatal(err)
			}
			return map[string]any{"id": r.ID}
		},
		func(t *testing.T, e *toolEnv, _ string) { wantRoute(t, e, "chat_jid=irc:eng", "corp/eng", false) }},
	"schedule_task": {"corp", "corp/eng",
		func(*testing.T, *toolEnv) map[string]any {
			return map[string]any{"cron": "0 9 * * 1-5", "tz": "Europe/Prague", "prompt": "standup", "folder": "corp/eng"}
		},
		func(t *testing.T, e *toolEnv, _ string) {
			ss, err := e.st.ListSchedules(context.Background())
			if err != nil || len(ss) != 1 || ss[0].Folder != "corp/eng" || ss[0].Owner != "folder:corp" || ss[0].TZ != "Europe/Prague" {
				t.Fatalf("schedules %+v %v, want corp/eng's, owned by folder:corp", ss, err)
			}
		}},
	"submit_turn": {"corp", "corp",
		func(*testing.T, *toolEnv) map[string]any { return map[string]any{"status": "ok", "result": "done"} },
		func(t *testing.T, e *toolEnv, _ string) {
			if got, _ := e.st.GetTurn(context.Background(), e.turn.TurnID); got.Outcome != "ok: done" {
				t.Fatalf("outcome %q, want %q", got.Outcome, "ok: done")
			}
		}},
}

// TestEveryToolDeniedWithoutGrant calls each tool as a folder without the grant (the
// seeded member grants of reply and send overridden by a deny row): the call is a
// readable error, writes exactly one audit row and changes nothing. With the grant the
// same call does its job.
func TestEveryToolDeniedWithoutGrant(t *testing.T) {
	for _, name := range Tools {
		row, ok := toolRows[name]
		if !ok {
			t.Errorf("tool %s has no row in toolRows: add its deny and allow case", name)
			continue
		}
		t.Run(name, func(t *testing.T) {
			e := newToolEnv(t, row.caller)
			args := row.setup(t, e)
			if name == "reply" || name == "send" {
				e.grant(t, "folder:"+row.caller, "mcp:"+name, row.scope, acl.Deny)
			}
			cs := e.connect(t, e.turn)
			before, audit := e.world(t), e.audit(t)
			text, isErr := call(t, cs, name, args)
			if !isErr || !strings.Contains(text, "permission denied") || !strings.Contains(text, "mcp:"+name) {
				t.Fatalf("denied call: isErr=%v %q, want a permission denied error naming mcp:%s", isErr, text, name)
			}
			after := e.audit(t)
			if len(after) != len(audit)+1 {
				t.Fatalf("denied call wrote %d audit rows, want 1: %+v", len(after)-len(audit), after)
			}
			if a := after[0]; a.Principal != "folder:"+row.caller || a.Action != "mcp:"+name || a.Scope != row.scope || a.Decision != "deny" {
				t.Fatalf("audit row %+v, want folder:%s mcp:%s %s deny", a, row.caller, name, row.scope)
			}
			if got := e.world(t); got != before {
				t.Fatalf("denied call changed the store:\nbefore %s\nafter  %s", before, got)
			}
			if len(e.msgs) != 0 {
				t.Fatalf("denied call woke %v", e.msgs)
			}

			e.grant(t, "folder:"+row.caller, "mcp:"+name, row.scope, acl.Allow)
			if name == "reply" || name == "send" {
				clearDeny(t, e, name)
			}
			text, isErr = call(t, cs, name, args)
			if isErr {
				t.Fatalf("granted call refused: %s", text)
			}
			row.effect(t, e, text)
			// Only a change of the route table is audited when allowed, as
			// the folder it was made for.
			for _, a := range e.audit(t)[:len(e.audit(t))-len(after)] {
				if a.Decision != "allow" || a.Principal != "folder:"+row.caller || !strings.HasPrefix(a.Action, "route:") {
					t.Fatalf("allowed call wrote audit row %+v", a)
				}
			}
		})
	}
	for name := range toolRows {
		if !slices.Contains(Tools, name) {
			t.Errorf("toolRows has %s, which is not in Tools", name)
		}
	}
}

// TestToolsListsEveryRegisteredTool keeps Tools honest: a tool registered on the server
// but missing from Tools would escape the table above.
func TestToolsListsEveryRegisteredTool(t *testing.T) {
	e := newToolEnv(t, "corp")
	e.grant(t, "folder:corp", "mcp:*", "**", acl.Allow)
	want := slices.Clone(Tools)
	slices.Sort(want)
	if got := toolNames(t, e.connect(t, e.turn)); !slices.Equal(got, want) {
		t.Fatalf("server registers %v, Tools lists %v", got, want)
	}
}

func newToolEnv(t *testing.T, caller string) *toolEnv {
	f := newFixture(t, "corp", "corp/eng", "hr")
	ctx := context.Background()
	m, _, err := f.st.PutMessage(ctx, store.Message{ChatJID: "tg:1", Platform: "tg", Text: "hi", Folder: caller})
	if err != nil {
		t.Fatal(err)
	}
	turn, err := f.st.CreateTurn(ctx, caller, "", m.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	return &toolEnv{fixture: f, turn: Turn{Folder: caller, TurnID: turn.ID, ChatJID: "tg:1"}}
}

// clearDeny removes the deny row the reply and send cases add.
func clearDeny(t *testing.T, e *toolEnv, name string) {
	gs, err := e.st.ListGrants(context.Background(), "folder:"+e.turn.Folder)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range gs {
		if g.Action == "mcp:"+name && g.Effect == acl.Deny {
			if err := e.st.DeleteGrant(context.Background(), g.ID); err != nil {
				t.Fatal(err)
			}
		}
	}
}

func (e *toolEnv) audit(t *testing.T) []store.AuditEntry {
	a, err := e.st.ListAudit(context.Background(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// world renders everything a tool can change, so a denied call can be shown to change
// nothing.
func (e *toolEnv) world(t *testing.T) string {
	ctx := context.Background()
	var b strings.Builder
	add := func(label string, v any, err error) {
		if err != nil && label != "sessions" {
			t.Fatalf("%s: %v", label, err)
		}
		fmt.Fprintf(&b, "%s=%+v ", label, v)
	}
	out, err := e.st.DueOutbound(ctx, math.MaxInt64, 1000)
	add("outbound", out, err)
	fs, err := e.st.ListFolders(ctx)
	names := []string{}
	for _, f := range fs {
		names = append(names, f.Path)
		in, err := e.st.PendingInbound(ctx, f.Path, "", 100)
		add("inbox:"+f.Path, len(in), err)
		obs, err := e.st.Observed(ctx, f.Path)
		add("observed:"+f.Path, obs, err)
	}
	add("folders", names, err)
	rs, err := e.st.ListRoutes(ctx)
	add("routes", rs, err)
	nr, err := e.st.NetworkRules(ctx)
	add("network", nr, err)
	s, err := e.st.GetSession(ctx, "corp", "side")
	add("sessions", s.SessionID, err)
	turn, err := e.st.GetTurn(ctx, e.turn.TurnID)
	add("outcome", turn.Outcome, err)
	return b.String()
}

func wantOutbound(t *testing.T, e *toolEnv, chat, text string) {
	outs, err := e.st.TurnOutbound(context.Background(), e.turn.TurnID)
	if err != nil || len(outs) != 1 || outs[0].ChatJID != chat || outs[0].Text != text || outs[0].Folder != e.turn.Folder {
		t.Fatalf("outbound %+v %v, want one row to %s: %q", outs, err, chat, text)
	}
}

func wantInbox(t *testing.T, e *toolEnv, f, text string) {
	msgs, err := e.st.PendingInbound(context.Background(), f, "", 10)
	if err != nil || len(msgs) != 1 || msgs[0].Text != text || msgs[0].Sender != "folder:"+e.turn.Folder {
		t.Fatalf("%s inbox %+v %v, want %q from %s", f, msgs, err, text, e.turn.Folder)
	}
	if !slices.Equal(e.msgs, []string{f}) {
		t.Fatalf("woken %v, want %s", e.msgs, f)
	}
}

func wantObserved(t *testing.T, e *toolEnv, want ...string) {
	obs, err := e.st.Observed(context.Background(), e.turn.Folder)
	if err != nil || !slices.Equal(obs, want) && len(obs)+len(want) > 0 {
		t.Fatalf("observed %v %v, want %v", obs, err, want)
	}
}

func addRoute(t *testing.T, e *toolEnv, match, target string) int64 {
	r, err := e.l.AddRoute(e.ctx, router.Route{Seq: 10, Match: match, Target: target})
	if err != nil {
		t.Fatal(err)
	}
	return r.ID
}

func wantRoute(t *testing.T, e *toolEnv, match, target string, present bool) {
	rs, err := e.st.ListRoutes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	found := slices.ContainsFunc(rs, func(r router.Route) bool { return r.Match == match && r.Target == target })
	if found != present {
		t.Fatalf("route %s -> %s present=%v, want %v: %+v", match, target, found, present, rs)
	}
}
