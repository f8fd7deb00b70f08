package turn

import (
	"context"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// An agent that prints its answer on stdout and exits 0 without calling a
// reply tool: by default its chat gets a notice and the turn the outcome "no
// reply"; a folder with the stdout reply on gets that stdout (and nothing of
// stderr) as the reply, unless a deny on mcp:reply holds it to the tool's
// rule. Every attempt keeps a bounded tail of stdout and stderr.
func TestUnansweredTurn(t *testing.T) {
	e := newEnv(t, "", "plain", "fallback", "denied")
	yes := true
	for _, f := range []string{"fallback", "denied"} {
		if _, err := e.l.SetFolder(e.ctx, f, service.FolderSet{StdoutReply: &yes}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.l.AddGrant(e.ctx, acl.Grant{Principal: "folder:denied", Action: "mcp:reply", Scope: "denied", Effect: acl.Deny}); err != nil {
		t.Fatal(err)
	}
	e.start(t, hostRunner{}, func(o *Options) { o.MaxRetries = -1 })
	ctx := context.Background()
	cases := []struct {
		folder, outcome, reply string
	}{
		{"plain", OutcomeNoReply, "arizuko: plain ended its turn without answering"},
		{"fallback", OutcomeStdoutReply, "I answered on stdout only"},
		{"denied", OutcomeNoReply, "arizuko: denied ended its turn without answering"},
	}
	for _, c := range cases {
		e.post(t, "web:"+c.folder, "STDOUT I answered on stdout only")
		tr := e.waitTurns(t, c.folder, 1)[0]
		if tr.Status != store.TurnDone || tr.Outcome != c.outcome || tr.ExitCode == nil || *tr.ExitCode != 0 {
			t.Errorf("%s: turn %+v, want done with outcome %q", c.folder, tr, c.outcome)
		}
		if c.outcome == OutcomeNoReply && !strings.Contains(tr.Error, "without calling a reply tool") {
			t.Errorf("%s: error %q does not say why", c.folder, tr.Error)
		}
		outs, err := e.st.TurnOutbound(ctx, tr.ID)
		if err != nil || len(outs) != 1 || outs[0].ChatJID != "web:"+c.folder || !strings.HasPrefix(outs[0].Text, c.reply) {
			t.Errorf("%s: outbound %+v %v, want one starting %q", c.folder, outs, err, c.reply)
		} else if c.outcome == OutcomeStdoutReply && outs[0].Text != c.reply {
			t.Errorf("%s: reply %q, want the stdout alone, %q", c.folder, outs[0].Text, c.reply)
		}
		d, err := e.l.GetTurn(e.ctx, tr.ID)
		if err != nil || len(d.Outputs) != 1 {
			t.Fatalf("%s: outputs %+v %v", c.folder, d.Outputs, err)
		}
		o := d.Outputs[0]
		if o.Attempt != 1 || o.ExitCode == nil || *o.ExitCode != 0 || len(o.Output) > store.MaxTurnOutput ||
			!strings.Contains(o.Output, "I answered on stdout only\n") || !strings.HasSuffix(o.Output, "stderr after the answer\n") ||
			strings.Contains(o.Output, "noise 0000") {
			t.Errorf("%s: output of %d bytes, want the last %d of stdout and stderr:\n%s", c.folder, len(o.Output), store.MaxTurnOutput, o.Output)
		}
	}
}

// A failing attempt keeps its output too, one record per attempt.
func TestFailedAttemptsKeepOutput(t *testing.T) {
	e := newEnv(t, "", "a")
	e.start(t, hostRunner{}, func(o *Options) { o.MaxRetries = 1 })
	e.post(t, "web:a", "FAIL")
	tr := e.waitTurns(t, "a", 1)[0]
	d, err := e.l.GetTurn(e.ctx, tr.ID)
	if err != nil || tr.Status != store.TurnFailed || len(d.Outputs) != 2 {
		t.Fatalf("turn %+v outputs %+v %v", tr, d.Outputs, err)
	}
	for i, o := range d.Outputs {
		if o.Attempt != i+1 || o.ExitCode == nil || *o.ExitCode != 1 || o.Output != "failing on purpose\n" {
			t.Errorf("attempt %d: %+v", i+1, o)
		}
	}
}

// handOffRunner is an agent that hands the question of folder a to folder b
// and ends without a reply.
type handOffRunner struct{ st *store.Store }

func (r handOffRunner) Run(ctx context.Context, j Job) (Result, error) {
	if j.Turn.Folder == "a" {
		if _, err := r.st.PutInternal(ctx, store.Internal{ChatJID: "web:a", From: "a", To: "b", Text: "take this", How: "delegate", Depth: 1}); err != nil {
			return Result{Exit: 1}, err
		}
	}
	return Result{}, nil
}

// A turn that delegated its question is not unanswered: its chat gets no
// notice, whoever answers it.
func TestHandedOffTurnIsNotUnanswered(t *testing.T) {
	e := newEnv(t, "", "a", "b")
	e.start(t, handOffRunner{e.st}, func(o *Options) { o.MaxRetries = -1 })
	e.post(t, "web:a", "hi")
	tr := e.waitTurns(t, "a", 1)[0]
	outs, err := e.st.TurnOutbound(context.Background(), tr.ID)
	if tr.Status != store.TurnDone || tr.Outcome != "ok, no reply" || err != nil || len(outs) != 0 {
		t.Fatalf("turn %+v outbound %+v %v", tr, outs, err)
	}
}
