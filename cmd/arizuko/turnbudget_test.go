package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// `arizuko folder budget` on the data dir and through a running daemon.
func TestFolderBudgetCLI(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "corp")
	if out := mustAz(t, e, "folder", "budget", "corp"); out != "corp: unlimited (instance default); 0 turns started in the last 24h\n" {
		t.Fatalf("budget offline: %q", out)
	}
	if out := mustAz(t, e, "folder", "budget", "corp", "7"); !strings.HasPrefix(out, "corp: 7 per day (folder setting)") {
		t.Fatalf("set offline: %q", out)
	}
	startDaemon(t, e, data)
	if out := mustAz(t, e, "folder", "budget", "corp"); !strings.HasPrefix(out, "corp: 7 per day (folder setting)") {
		t.Fatalf("budget via daemon: %q", out)
	}
	if out := mustAz(t, e, "folder", "budget", "corp", "default"); !strings.HasPrefix(out, "corp: unlimited (instance default)") {
		t.Fatalf("default via daemon: %q", out)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"folder", "budget", "corp", "--", "-1"}, "want 0 (unlimited)"},
		{[]string{"folder", "budget", "corp", "lots"}, "want 0 (unlimited)"},
		{[]string{"folder", "budget", "nope", "3"}, "nope"},
	} {
		_, errs, err := az(t, e, c.args...)
		if _, ok := err.(*exec.ExitError); !ok || !strings.Contains(errs, c.want) {
			t.Errorf("arizuko %s: %v %q", strings.Join(c.args, " "), err, errs)
		}
	}
}

func TestTurnsConfigBudget(t *testing.T) {
	for _, c := range []struct {
		n  int
		ok bool
	}{{0, true}, {50, true}, {service.MaxTurnBudget, true}, {-1, false}, {service.MaxTurnBudget + 1, false}} {
		err := TurnsConfig{MaxTurnsPerDay: c.n}.validate()
		if (err == nil) != c.ok || (err != nil && !strings.Contains(err.Error(), "turns.max_turns_per_day")) {
			t.Errorf("max_turns_per_day %d: %v", c.n, err)
		}
	}
}
