package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/home"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// counterAgent reads the count its folder's home holds, notes what it saw,
// writes the next count and a file of its own, then replies.
const counterAgent = `n=$(cat "$HOME/count" 2>/dev/null || echo 0)
echo "$ARIZUKO_TURN $HOME n=$n seed=$(cat "$HOME/seed.txt" 2>/dev/null) notes=$(ls "$HOME/notes" 2>/dev/null | tr '\n' ,)" >> "$LIVE/ran"
echo $((n+1)) > "$HOME/count"
mkdir -p "$HOME/notes" && echo "turn $ARIZUKO_TURN" > "$HOME/notes/$n"
exec python3 "$AGENT"`

// turnDone says one message and waits for its turn to be done.
func (f *fleetEnv) turnDone(folder, text string, turns int) {
	f.t.Helper()
	f.say(folder, text)
	admin := service.WithPrincipal(context.Background(), service.AdminPrincipal)
	f.waitFor(90*time.Second, "turn "+text+" done", func() bool {
		ts, err := f.client.ListTurns(admin, folder, 100)
		return err == nil && len(ts) == turns && ts[0].Status == store.TurnDone
	})
}

// stopRunner ends a runner as its host's service manager would.
func (f *fleetEnv) stopRunner(r *runnerProc) {
	r.cmd.Process.Signal(syscall.SIGTERM)
	<-r.done
}

// seedDir writes files into a new directory to push as a home.
func seedDir(t *testing.T, files map[string]string) string {
	d := t.TempDir()
	for p, body := range files {
		full := filepath.Join(d, p)
		os.MkdirAll(filepath.Dir(full), 0o755)
		if err := os.WriteFile(full, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// A folder's turns move between runners (each stopped in turn, one coming
// back with its old copy): every turn sees the home the previous one
// committed, the log holds each commit, a restore takes the next turn back
// to that version, and push, diff and pull work through the CLI.
func TestFleetHomeFollowsTurns(t *testing.T) {
	f := newFleet(t, map[string]string{"h": counterAgent})
	out := mustAz(t, f.env, "home", "push", "h", seedDir(t, map[string]string{"seed.txt": "seeded", "count": "10"}))
	if !strings.Contains(out, "version 1") {
		t.Fatalf("push: %s", out)
	}
	t1, t2 := f.runnerToken("r1"), f.runnerToken("r2")
	r1 := f.startRunner("r1", t1, 1)
	f.waitPulling("r1")
	f.turnDone("h", "m0", 1)
	r2 := f.startRunner("r2", t2, 1)
	f.waitPulling("r2")
	f.stopRunner(r1)
	f.turnDone("h", "m1", 2)
	// r1 comes back with the copy of version 2 it left; version 3 is r2's.
	f.startRunner("r1", t1, 1)
	f.waitPulling("r1")
	f.stopRunner(r2)
	f.turnDone("h", "m2", 3)

	ran := f.lines("ran")
	if len(ran) != 3 {
		t.Fatalf("runs %q", ran)
	}
	for i, want := range []struct{ runner, n string }{{"/r1/", "n=10"}, {"/r2/", "n=11"}, {"/r1/", "n=12"}} {
		if !strings.Contains(ran[i], want.runner) || !strings.Contains(ran[i], want.n+" ") || !strings.Contains(ran[i], "seed=seeded") {
			t.Errorf("run %d: %q, want it on %s seeing %s and the seed", i, ran[i], want.runner, want.n)
		}
	}
	if !strings.HasSuffix(ran[2], "notes=10,11,") {
		t.Errorf("run 3 on r1 does not see notes/11 written on r2: %q", ran[2])
	}

	log := mustAz(t, f.env, "home", "log", "h")
	var vs []home.Version
	mustJSON(t, mustAz(t, f.env, "--json", "home", "log", "h"), &vs)
	if len(vs) != 4 || vs[0].Source != "push" || vs[3].Source != "turn" || vs[3].Turn == 0 || vs[3].Changed != 2 {
		t.Fatalf("home log:\n%s", log)
	}
	diff := mustAz(t, f.env, "home", "diff", "h", "2", "4")
	if !strings.Contains(diff, "~ count") || !strings.Contains(diff, "+ notes/11") || !strings.Contains(diff, "+ notes/12") {
		t.Errorf("diff 2 4:\n%s", diff)
	}

	// Back to version 2 (after the first turn): the next turn sees it.
	mustAz(t, f.env, "home", "restore", "h", "--version", "2")
	f.turnDone("h", "m3", 4)
	if last := f.lines("ran")[3]; !strings.Contains(last, "n=11 ") || !strings.HasSuffix(last, "notes=10,") {
		t.Errorf("the turn after the restore of version 2: %q, want count 11 and no notes/11", last)
	}
	pulled := filepath.Join(t.TempDir(), "pulled")
	mustAz(t, f.env, "home", "pull", "h", pulled)
	if b, _ := os.ReadFile(filepath.Join(pulled, "count")); strings.TrimSpace(string(b)) != "12" {
		t.Errorf("pulled count %q, want 12", b)
	}
	if _, err := os.Stat(filepath.Join(pulled, "notes", "12")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pulled home holds notes/12 of a version the restore left behind: %v", err)
	}
	metrics := getText(t, "http://"+f.addr+"/v1/metrics", f.token)
	for _, m := range []string{"arizuko_home_fetched_bytes_total", "arizuko_home_cache_hits_total", "arizuko_home_committed_bytes_total"} {
		if !strings.Contains(metrics, m+" ") || strings.Contains(metrics, m+" 0\n") {
			t.Errorf("metric %s missing or zero:\n%s", m, metrics)
		}
	}
}

// A runner SIGKILLed after its agent wrote into the home: the re-run on the
// other runner starts from the home the first attempt saw, the committed
// home is that plus the re-run's writes, and the killed runner's claim can
// no longer fetch or commit anything.
func TestFleetHomeRunnerKilledMidTurn(t *testing.T) {
	f := newFleet(t, map[string]string{"k": `n=$(cat "$HOME/count" 2>/dev/null || echo 0)
partial=no; test -e "$HOME/partial" && partial=yes
echo "$ARIZUKO_TURN $HOME n=$n partial=$partial" >> "$LIVE/ran"
if [ ! -e "$LIVE/killed" ]; then echo half > "$HOME/partial"; echo $((n+100)) > "$HOME/count"; echo "$HOME" >> "$LIVE/wrote"; sleep 60; fi
echo $((n+1)) > "$HOME/count"; echo rerun > "$HOME/rerun"
sleep 3
exec python3 "$AGENT"`})
	mustAz(t, f.env, "home", "push", "k", seedDir(t, map[string]string{"count": "5"}))
	tokens := map[string]string{"r1": f.runnerToken("r1"), "r2": f.runnerToken("r2")}
	rs := []*runnerProc{f.startRunner("r1", tokens["r1"], 1), f.startRunner("r2", tokens["r2"], 1)}
	f.waitPulling("r1", "r2")
	f.say("k", "hello")
	f.waitFor(60*time.Second, "the first run's write", func() bool { return len(f.lines("wrote")) == 1 })
	var victim, other *runnerProc
	for i, r := range rs {
		if strings.Contains(f.lines("wrote")[0], "/"+r.name+"/") {
			victim, other = r, rs[1-i]
		}
	}
	nc := f.nats.Connect()
	first, err := readLease(nc, "k")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(f.live, "killed"), nil, 0o644)
	victim.cmd.Process.Signal(syscall.SIGKILL)
	<-victim.done

	// While the other runner re-runs the same dispatch, the killed runner's
	// token holding the first claim is refused: no read, no commit.
	f.waitFor(90*time.Second, "the re-run on "+other.name, func() bool {
		l, err := readLease(nc, "k")
		return err == nil && l.Runner == other.name && len(f.lines("ran")) == 2
	})
	ghost := &dispatch.Client{URL: "http://" + f.addr, Token: tokens[victim.name]}
	c := dispatch.Claim{Turn: first.Turn, Attempt: first.Attempt, Dispatch: first.Dispatch, Folder: "k"}
	ctx := context.Background()
	if _, err := ghost.HomeLatest(ctx, c, ""); !errors.Is(err, dispatch.ErrNotHolder) && !errors.Is(err, dispatch.ErrStale) {
		t.Errorf("the killed runner's claim read the home: %v", err)
	}
	if err := ghost.HomeUpload(ctx, c, [][]byte{[]byte("forged")}); !errors.Is(err, dispatch.ErrNotHolder) && !errors.Is(err, dispatch.ErrStale) {
		t.Errorf("the killed runner's claim uploaded a chunk: %v", err)
	}
	if _, err := ghost.HomeManifest(ctx, c, home.Manifest{}); !errors.Is(err, dispatch.ErrNotHolder) && !errors.Is(err, dispatch.ErrStale) {
		t.Errorf("the killed runner's claim sent a manifest: %v", err)
	}

	admin := service.WithPrincipal(ctx, service.AdminPrincipal)
	f.waitFor(90*time.Second, "the turn to finish", func() bool {
		ts, err := f.client.ListTurns(admin, "k", 10)
		return err == nil && len(ts) == 1 && ts[0].Status == store.TurnDone
	})
	ran := f.lines("ran")
	if !strings.Contains(ran[1], "/"+other.name+"/") || !strings.Contains(ran[1], "n=5 partial=no") {
		t.Errorf("re-run %q: want it on %s from the pre-turn home (count 5, no partial file)", ran[1], other.name)
	}
	pulled := filepath.Join(t.TempDir(), "pulled")
	mustAz(t, f.env, "home", "pull", "k", pulled)
	got := map[string]string{}
	filepath.WalkDir(pulled, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			b, _ := os.ReadFile(p)
			rel, _ := filepath.Rel(pulled, p)
			got[rel] = strings.TrimSpace(string(b))
		}
		return nil
	})
	if want := map[string]string{"count": "6", "rerun": "rerun"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("committed home %v, want the pre-turn home plus the re-run's writes %v", got, want)
	}
	var vs []home.Version
	mustJSON(t, mustAz(t, f.env, "--json", "home", "log", "k"), &vs)
	if len(vs) != 2 || vs[1].Attempt != first.Attempt || vs[1].Source != "turn" {
		t.Errorf("log %+v: want the push and one commit of the re-run", vs)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("%v: %s", err, s)
	}
}

// getText GETs url with a bearer token and returns the body.
func getText(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// The single-host steps, then --nats: the agent the operator copied into the
// control plane's <data>/homes/<folder> becomes the folder's first version,
// and a runner with an empty disk runs it.
func TestFleetHomeImportedFromControlPlaneDisk(t *testing.T) {
	f := newFleet(t, map[string]string{"north": `exec python3 "$HOME/agent.py"`})
	agent, err := os.ReadFile(filepath.Join("..", "..", "examples", "agents", "scripted", "agent.py"))
	if err != nil {
		t.Fatal(err)
	}
	dir, err := folder.EnsureHome(f.data, "north")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "agent.py"), agent, 0o644); err != nil {
		t.Fatal(err)
	}
	f.stopCP(syscall.SIGTERM)
	f.startCP()
	f.startRunner("r1", f.runnerToken("r1"), 1)
	f.turnDone("north", "hello", 1)
	if rep := f.replies("north"); len(rep) != 1 || rep[0].Text != "echo: hello" {
		t.Fatalf("replies %+v", rep)
	}
	var vs []home.Version
	mustJSON(t, mustAz(t, f.env, "--json", "home", "log", "north"), &vs)
	if len(vs) == 0 || vs[0].Source != "import" {
		t.Errorf("log %+v, want the import first", vs)
	}
}
