package dispatch

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/jailtest"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/jail"
)

// slotJail boots each attempt in a real guest, holding one of jailtest's
// machine-wide guest slots meanwhile.
type slotJail struct{ inner turn.Runner }

func (s slotJail) Run(ctx context.Context, j turn.Job) (turn.Result, error) {
	release, err := jailtest.Acquire(ctx)
	if err != nil {
		return turn.Result{Exit: jail.ExitFailed}, err
	}
	defer release()
	return s.inner.Run(ctx, j)
}

// A turn dispatched through JetStream runs the scripted agent in a real
// guest on the runner; the guest's tool calls cross to the control plane,
// which refuses the one the folder holds no grant for and audits it there,
// and the reply lands in the control plane's store once.
func TestFleetTurnInRealGuest(t *testing.T) {
	jenv := jailtest.Require(t)
	p := newPlane(t, true, 10*time.Second, nil, nil)
	exec := slotJail{inner: &turn.JailRunner{Kernel: jenv.Kernel, GuestInit: jenv.GuestInit, NetMode: jail.NetProxyOnly,
		Timeout: 4 * time.Minute, UID: -1, GID: -1}}
	data := p.runner(t, "host-1", nil, exec)
	_, file, _, _ := runtime.Caller(0)
	agent, err := os.ReadFile(filepath.Join(filepath.Dir(file), "..", "..", "..", "examples", "agents", "scripted", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	// The folder's home is the control plane's: seeded as `arizuko home push`
	// does, fetched by the runner before the guest starts.
	seed := t.TempDir()
	if err := os.WriteFile(filepath.Join(seed, "agent.py"), agent, 0o755); err != nil {
		t.Fatal(err)
	}
	m, _, _, err := home.Scan(seed, nil, home.Limits{}, func(_ string, b []byte) error { _, err := p.setup.Homes.PutChunk(p.ctx, b); return err })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.setup.Homes.Commit(p.ctx, "g", m, home.Version{Source: "push"}); err != nil {
		t.Fatal(err)
	}
	actx := service.WithPrincipal(p.ctx, service.AdminPrincipal)
	if _, err := p.l.AddFolder(actx, store.Folder{Path: "g", AgentCommand: []string{"python3", turn.DefaultGuestHome + "/agent.py"}}); err != nil {
		t.Fatal(err)
	}
	p.post(t, "g", `TRY observe_group {"source": "g"}`)
	eventually.True(t, 6*time.Minute, "the guest's turn", func() bool { return p.idle(t) })
	st := p.l.Store()
	ts, err := st.ListTurns(p.ctx, "g", 10)
	if err != nil || len(ts) != 1 || ts[0].Status != store.TurnDone || ts[0].ExitCode == nil || *ts[0].ExitCode != 0 {
		t.Fatalf("turns %+v %v", ts, err)
	}
	outs, err := st.TurnOutbound(p.ctx, ts[0].ID)
	if err != nil || len(outs) != 1 || !strings.HasPrefix(outs[0].Text, "denied: ") || !strings.Contains(outs[0].Text, "mcp:observe_group") {
		t.Fatalf("replies %+v %v, want one denial", outs, err)
	}
	audit, _ := st.ListAudit(p.ctx, 20)
	found := false
	for _, x := range audit {
		if x.Principal == "folder:g" && x.Action == "mcp:observe_group" && x.Decision == "deny" {
			found = true
		}
	}
	if !found {
		t.Fatalf("the denial is not in the control plane's audit: %+v", audit)
	}
	dir, _ := folder.Home(data, "g")
	if _, err := os.Stat(filepath.Join(dir, "agent.py")); err != nil {
		t.Errorf("the runner's copy of the home: %v", err)
	}
	if l, err := p.setup.Homes.Log(p.ctx, "g"); err != nil || len(l.Versions) != 1 {
		t.Errorf("home log %+v %v: a turn that changed nothing commits no version", l, err)
	}
}
