package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// turns ls|show read the data dir directly when no daemon runs.
func TestTurnsCommandsOnDataDir(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	mustAz(t, e, "send", "web:corp", "what is up")
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(data, "arizuko.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := st.PendingInbound(ctx, "corp", "", 10)
	if len(msgs) != 1 {
		t.Fatalf("pending %+v", msgs)
	}
	tr, _ := st.CreateTurn(ctx, "corp", "", msgs[0].ID, msgs[0].ID)
	st.StartTurn(ctx, tr.ID, "sess1")
	st.PutOutbound(ctx, store.Outbound{ChatJID: "web:corp", Folder: "corp", Text: "all good", TurnID: tr.ID})
	exit := 0
	if err := st.FinishTurn(ctx, tr.ID, store.TurnEnd{Status: store.TurnDone, Outcome: "ok", ExitCode: &exit, Egress: "crackbox: blocked 1 request: evil.test:443 (1)"}); err != nil {
		t.Fatal(err)
	}
	st.Close()

	out := mustAz(t, e, "turns", "ls")
	if !strings.Contains(out, "corp") || !strings.Contains(out, "done") || !strings.Contains(out, "ok") {
		t.Fatalf("turns ls:\n%s", out)
	}
	out = mustAz(t, e, "turns", "show", "1")
	for _, want := range []string{"turn 1", "sess1", "exit      0", "evil.test", "what is up", "-> web:corp [pending", "all good"} {
		if !strings.Contains(out, want) {
			t.Errorf("turns show lacks %q:\n%s", want, out)
		}
	}
	var ts []store.Turn
	if err := json.Unmarshal([]byte(mustAz(t, e, "--json", "turns", "ls", "--folder", "corp")), &ts); err != nil || len(ts) != 1 {
		t.Fatalf("json %v %+v", err, ts)
	}
	if _, stderr, err := az(t, e, "turns", "show", "x"); err == nil || !strings.Contains(stderr, "positive number") {
		t.Fatalf("bad id: %v %s", err, stderr)
	}
}

func TestTurnsConfigValidate(t *testing.T) {
	for _, c := range []struct {
		name string
		tc   TurnsConfig
		ok   bool
	}{
		{"defaults", TurnsConfig{}, true},
		{"proxy-only", TurnsConfig{NetMode: "proxy-only", MaxConcurrentGuests: 2}, true},
		{"bad net mode", TurnsConfig{NetMode: "bridge"}, false},
		{"negative cap", TurnsConfig{MaxConcurrentGuests: -1}, false},
		{"relative home", TurnsConfig{GuestHome: "home"}, false},
		{"deep chains", TurnsConfig{MaxDelegationDepth: 99}, false},
	} {
		if err := c.tc.validate(); (err == nil) != c.ok {
			t.Errorf("%s: validate() = %v, want ok=%v", c.name, err, c.ok)
		}
	}
}
