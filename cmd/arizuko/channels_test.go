package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/servicetest"
	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/schedule"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

// apiCall sends one request with the admin token and decodes a 2xx answer.
func apiCall(t *testing.T, base, token, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, base+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReply waits for the agent's reply text in a chat and returns it.
func waitReply(t *testing.T, st *store.Store, chat, text string) store.Message {
	t.Helper()
	var reply store.Message
	if !eventually.Within(60*time.Second, func() bool {
		ms, err := st.ListMessages(context.Background(), chat, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		i := slices.IndexFunc(ms, func(m store.Message) bool { return m.Direction == "out" && m.Text == text })
		if i >= 0 {
			reply = ms[i]
		}
		return i >= 0
	}) {
		t.Fatalf("no reply %q in %s", text, chat)
	}
	return reply
}

// turnOf is the turn that took message id.
func turnOf(t *testing.T, st *store.Store, folder string, id int64) store.Turn {
	t.Helper()
	ts, err := st.ListTurns(context.Background(), folder, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		if tr.FirstMessage <= id && id <= tr.LastMessage {
			return tr
		}
	}
	t.Fatalf("no turn of message %d in %+v", id, ts)
	return store.Turn{}
}

// A webhook delivery to the daemon starts a turn in its folder and the
// agent's reply lands in the folder's chat (signatures: pkg/arizuko/hook's tests).
func TestWebhookStartsTurn(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "acme")
	var h service.NewHook
	apiCall(t, base, token, "POST", "/v1/hooks", service.HookIn{Folder: "acme"}, &h)
	body := "build 42 is green"
	req, _ := http.NewRequest("POST", base+h.Path, strings.NewReader(body))
	req.Header.Set("Content-Type", "text/plain")
	req.Header.Set("X-GitHub-Delivery", "d-42")
	sent := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("delivery: %d", resp.StatusCode)
	}
	r := waitReply(t, st, "web:acme", "echo: "+body)
	t.Logf("webhook delivery to agent reply: %s", time.UnixMilli(r.CreatedAt).Sub(sent).Round(time.Millisecond))
}

// A schedule every two seconds fires through the daemon's own scheduler
// (the wall clock here: this is the end-to-end run), the agent answers each
// firing once, and the latency from due time to turn start and to reply is
// measured. After its removal it fires no more.
func TestScheduledTurnLatency(t *testing.T) {
	base, token, st := chatDaemon(t, TurnsConfig{}, "acme")
	var sc store.Schedule
	apiCall(t, base, token, "POST", "/v1/schedules", service.ScheduleIn{Folder: "acme", Cron: "*/2 * * * * *", Prompt: "scheduled ping"}, &sc)
	due := time.UnixMilli(sc.NextRun)
	r := waitReply(t, st, "web:acme", "echo: scheduled ping")
	ms, _ := st.ListMessages(context.Background(), "web:acme", 0, 1000)
	var in store.Message
	for _, m := range ms {
		if m.Direction == "in" && m.Sender == service.SchedulePrincipal(sc.ID) {
			in = m
			break
		}
	}
	if in.PlatformID != fmt.Sprintf("%s:%d", service.SchedulePrincipal(sc.ID), sc.NextRun) {
		t.Fatalf("first firing %+v, want the due time %s", in, due)
	}
	tr := turnOf(t, st, "acme", in.ID)
	stored, started, replied := time.UnixMilli(in.CreatedAt).Sub(due), time.UnixMilli(tr.StartedAt).Sub(due), time.UnixMilli(r.CreatedAt).Sub(due)
	t.Logf("scheduled turn latency from due time: message stored %s, turn started %s, agent reply %s", stored, started, replied)
	if stored < 0 || stored > 2*time.Second {
		t.Errorf("fired %s after its due time, want within a second or two", stored)
	}
	// The live schedule is added before the removal, so it does not take the
	// removed one's id.
	var live store.Schedule
	apiCall(t, base, token, "POST", "/v1/schedules", service.ScheduleIn{Folder: "acme", Cron: "* * * * * *", Prompt: "live ping"}, &live)
	apiCall(t, base, token, "DELETE", fmt.Sprintf("/v1/schedules/%d", sc.ID), nil, nil)
	removed := time.Now()
	// firings maps each due time a schedule fired for to its count.
	firings := func(id int64) map[time.Time]int {
		out := map[time.Time]int{}
		ms, _ := st.ListMessages(context.Background(), "web:acme", 0, 1000)
		for _, m := range ms {
			if due, ok := strings.CutPrefix(m.PlatformID, service.SchedulePrincipal(id)+":"); ok && m.Sender == service.SchedulePrincipal(id) {
				at, _ := strconv.ParseInt(due, 10, 64)
				out[time.UnixMilli(at)]++
			}
		}
		return out
	}
	// The scheduler fires what is due one pass at a time: the live schedule's
	// third firing due after the removal comes in a pass after one that would
	// have seen the removed schedule's next due time, so what the removed one
	// fired is final then.
	eventually.True(t, time.Minute, "the live schedule fires three times after the removal", func() bool {
		n := 0
		for due := range firings(live.ID) {
			if due.After(removed) {
				n++
			}
		}
		return n >= 3
	})
	n := 0
	for due, k := range firings(sc.ID) {
		n += k
		if k != 1 {
			t.Errorf("due time %s fired %d times", due, k)
		}
		if due.After(removed) {
			t.Errorf("the removed schedule fired for %s, after its removal at %s", due, removed)
		}
	}
	audit, _ := st.ListAudit(context.Background(), 1000)
	fired := 0
	for _, a := range audit {
		if a.Action == "schedule:fire" && a.Decision == "allow" && a.Scope == "acme" && strings.HasPrefix(a.Reason, fmt.Sprintf("schedule %d due ", sc.ID)) {
			fired++
		}
	}
	if fired != n {
		t.Fatalf("%d schedule:fire audit rows for %d firings", fired, n)
	}
}

// Two control planes in fleet mode, each with its own database holding the
// same every-second schedule, share a real NATS JetStream: across both,
// each due time fires exactly once (the daemon's own wiring: startFleet's
// claims bucket and the scheduler's loop on the wall clock).
func TestFleetControlPlanesFireOnce(t *testing.T) {
	tc := fleetTurns(t)
	prev := newTurnRunner
	newTurnRunner = func(TurnsConfig) turn.Runner { return hostProcess{} }
	t.Cleanup(func() { newTurnRunner = prev })
	var stores []*store.Store
	var ids []int64
	for range 2 {
		e := servicetest.New(t, servicetest.Options{})
		e.AddFolder(t, "acme")
		sc, err := e.L.AddSchedule(e.Admin, service.ScheduleIn{Folder: "acme", Cron: "* * * * * *", Prompt: "tick"})
		if err != nil {
			t.Fatal(err)
		}
		_, stop, err := startTurns(context.Background(), tc, e.L, openapiAdmin, "")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(stop)
		stores, ids = append(stores, e.Store), append(ids, sc.ID)
	}
	if ids[0] != ids[1] {
		t.Fatalf("schedule ids %v: the two planes must hold the same schedule", ids)
	}
	collect := func() map[string][]int {
		fired := map[string][]int{}
		for i, st := range stores {
			ms, err := st.ListMessages(context.Background(), "web:acme", 0, 1000)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range ms {
				if m.Sender == service.SchedulePrincipal(ids[i]) {
					fired[m.PlatformID] = append(fired[m.PlatformID], i)
				}
			}
		}
		return fired
	}
	// A plane handles due times one pass at a time and stores the next run
	// before it fires, so one whose next run is two seconds past the third
	// due time fired has fired that and every earlier one, or lost the claim.
	var third int64
	eventually.True(t, time.Minute, "three due times fire and both planes pass them", func() bool {
		var dues []int64
		for id := range collect() {
			_, ms, _ := strings.Cut(id, service.SchedulePrincipal(ids[0])+":")
			at, _ := strconv.ParseInt(ms, 10, 64)
			dues = append(dues, at)
		}
		if len(dues) < 3 {
			return false
		}
		slices.Sort(dues)
		third = dues[2]
		for _, st := range stores {
			sc, err := st.GetSchedule(context.Background(), ids[0])
			if err != nil || sc.NextRun <= third+2000 {
				return false
			}
		}
		return true
	})
	fired := map[string][]int{}
	for id, planes := range collect() {
		_, ms, _ := strings.Cut(id, service.SchedulePrincipal(ids[0])+":")
		if at, _ := strconv.ParseInt(ms, 10, 64); at <= third {
			fired[id] = planes
		}
	}
	for due, planes := range fired {
		if len(planes) != 1 {
			t.Errorf("due time %s fired on planes %v, want exactly one", due, planes)
		}
	}
	t.Logf("%d due times, each fired by one of two control planes: %v", len(fired), fired)
}

// A schedule fires as its owner: an agent's schedule stops firing when its
// schedule_task grant is revoked, and the refusal is audited.
func TestScheduleFiresAsItsOwner(t *testing.T) {
	e := servicetest.New(t, servicetest.Options{})
	e.AddFolder(t, "acme")
	ctx := context.Background()
	g, err := e.L.AddGrant(e.Admin, acl.Grant{Principal: "folder:acme", Action: "mcp:schedule_task", Scope: "acme", Effect: acl.Allow})
	if err != nil {
		t.Fatal(err)
	}
	sc, err := e.L.AddSchedule(service.OnBehalf(e.Admin, "folder:acme"), service.ScheduleIn{Folder: "acme", Cron: "@hourly", Prompt: "agent's own"})
	if err != nil || sc.Owner != "folder:acme" {
		t.Fatalf("schedule %+v %v", sc, err)
	}
	fire := func(due int64) error {
		return fireSchedule(ctx, e.L, e.L.PostMessage, schedule.Firing{Schedule: sc, Due: time.UnixMilli(due), At: time.Now()})
	}
	if err := fire(1000); err != nil {
		t.Fatalf("granted: %v", err)
	}
	if err := e.L.RemoveGrant(e.Admin, g.ID); err != nil {
		t.Fatal(err)
	}
	if err := fire(2000); service.Code(err) != service.CodeDenied {
		t.Fatalf("after the grant's revocation: %v, want denied", err)
	}
	ms, _ := e.Store.ListMessages(ctx, "web:acme", 0, 100)
	if len(ms) != 1 || ms[0].Sender != service.SchedulePrincipal(sc.ID) || ms[0].Text != "agent's own" {
		t.Fatalf("acme's chat %+v, want the one granted firing", ms)
	}
	audit, _ := e.Store.ListAudit(ctx, 10)
	if a := audit[0]; a.Principal != "folder:acme" || a.Action != "mcp:schedule_task" || a.Decision != "deny" {
		t.Fatalf("newest audit row %+v, want the refused firing", a)
	}
}
