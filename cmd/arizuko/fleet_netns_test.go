package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// netnsFleet is a fleet whose NATS cluster and control plane listen only on
// the bridge of two simulated hosts, each runner inside its own host's
// network namespace: the runners reach them over their veths alone.
func netnsFleet(t *testing.T, folders map[string]string) (*fleetEnv, *nettest.Hosts) {
	t.Helper()
	hosts := nettest.NewHosts(t, 2)
	return newFleetOn(t, folders, hosts.Addr), hosts
}

// The two-runner check with each runner on its own simulated host.
func TestFleetNetnsTwoRunnersFiveFolders(t *testing.T) {
	var hosts *nettest.Hosts
	newF := func(t *testing.T, folders map[string]string) *fleetEnv {
		var f *fleetEnv
		f, hosts = netnsFleet(t, folders)
		return f
	}
	twoRunnersFiveFolders(t, newF, func(f *fleetEnv, i int, name string) {
		f.startRunnerIn(hosts.List[i], name, f.runnerToken(name), 3)
	})
}

// A runner's link is cut after its agent replied, mid-turn, and restored
// once the other runner has re-run the turn: the cut runner stops its turn
// (the agent, still running, holds the folder's flock until it is killed)
// before the other can start it, the chat gets exactly one reply, the lease
// history never shows two holders, and the restored runner takes turns again.
func TestFleetNetnsLinkCutMidTurn(t *testing.T) {
	f, hosts := netnsFleet(t, map[string]string{"k": `exec 9>"$LIVE/k.lock"
flock -n 9 || echo "$ARIZUKO_TURN" >> "$LIVE/overlap"
echo "$ARIZUKO_TURN $HOME" >> "$LIVE/ran"
echo "$HOME" > "$HOME/by"
python3 "$AGENT" || exit $?
echo "$HOME" >> "$LIVE/replied"
exec sleep 20`})
	hist := f.recordLeases()
	rs := []*runnerProc{
		f.startRunnerIn(hosts.List[0], "r1", f.runnerToken("r1"), 1),
		f.startRunnerIn(hosts.List[1], "r2", f.runnerToken("r2"), 1),
	}
	f.say("k", "hello")
	f.waitFor(60*time.Second, "the first run's reply", func() bool { return len(f.lines("replied")) == 1 })
	first := f.lines("replied")[0]
	cut := -1
	for i, r := range rs {
		if strings.Contains(first, "/"+r.name+"/") {
			cut = i
		}
	}
	if cut < 0 {
		t.Fatalf("reply from an unknown runner: %q", first)
	}
	victim, other := rs[cut], rs[1-cut]
	hosts.List[cut].SetLink(t, false)
	cutAt := time.Now()
	ctx := service.WithPrincipal(context.Background(), service.AdminPrincipal)
	f.waitFor(90*time.Second, "the turn to finish on the other runner", func() bool {
		ts, err := f.client.ListTurns(ctx, "k", 10)
		return err == nil && len(ts) == 1 && ts[0].Status == store.TurnDone
	})
	t.Logf("turn finished %s after the cut (lease ttl %s)", time.Since(cutAt).Round(time.Millisecond), fleetLeaseTTL)
	if !strings.Contains(victim.logs.String(), "lease lost") {
		t.Errorf("%s did not notice it lost the lease:\n%s", victim.name, victim.logs)
	}
	hosts.List[cut].SetLink(t, true)
	ran := f.lines("ran")
	if len(ran) != 2 || !strings.Contains(ran[1], "/"+other.name+"/") {
		t.Fatalf("runs %q: want the second on %s", ran, other.name)
	}
	if rep := f.replies("k"); len(rep) != 1 || rep[0].Text != "echo: hello" {
		t.Fatalf("chat got %d replies %+v, want exactly one", len(rep), rep)
	}
	// The cut runner's attempt committed nothing: the one version is the re-run's.
	var vs []home.Version
	mustJSON(t, mustAz(t, f.env, "--json", "home", "log", "k"), &vs)
	pulled := filepath.Join(t.TempDir(), "k")
	mustAz(t, f.env, "home", "pull", "k", pulled)
	if by, _ := os.ReadFile(filepath.Join(pulled, "by")); len(vs) != 1 || !strings.Contains(string(by), "/"+other.name+"/") {
		t.Errorf("home log %+v, by %q: want one version, written on %s", vs, by, other.name)
	}

	// Back on the link, the cut runner serves turns again: the other one is
	// stopped, so the next message can only be answered by it.
	other.cmd.Process.Kill()
	<-other.done
	f.say("k", "again")
	f.waitFor(90*time.Second, "the restored runner's reply", func() bool { return len(f.replies("k")) == 2 })
	if ran := f.lines("ran"); len(ran) != 3 || !strings.Contains(ran[2], "/"+victim.name+"/") {
		t.Errorf("runs %q: want the third on %s", ran, victim.name)
	}
	if o := f.lines("overlap"); len(o) > 0 {
		t.Errorf("two live turns of k: %v", o)
	}
	if bad := overlaps(hist()); len(bad) > 0 {
		t.Errorf("lease history shows overlapping holders:\n%s", strings.Join(bad, "\n"))
	}
	if rep := f.replies("k"); len(rep) != 2 || rep[1].Text != "echo: again" {
		t.Errorf("replies %+v", rep)
	}
}
