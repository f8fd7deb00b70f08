package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/eventually"
	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// fleetLeaseTTL is the default: a loaded machine running the in-process
// cluster under -race must renew in time, or turns churn between runners.
const fleetLeaseTTL = 15 * time.Second

// fleetEnv is a real fleet: a 3-node JetStream cluster, the control plane as
// an `arizuko serve` process with [fleet] nats set, and runner processes.
type fleetEnv struct {
	t       *testing.T
	nats    *natstest.Cluster
	data    string
	env     []string
	token   string
	addr    string // the control plane's fixed address, kept across restarts
	cp      *exec.Cmd
	cpLogs  *nettest.Buffer
	live    string // where the test agents leave their traces
	client  *api.Client
	mu      sync.Mutex
	runners map[string]*runnerProc
	// secure, when set, is the shipped NATS config's server: every process
	// connects with its own identity over TLS. Unset, they pass --insecure-nats.
	secure *natstest.Shipped
}

type runnerProc struct {
	name, data string
	cmd        *exec.Cmd
	logs       *nettest.Buffer
	done       chan struct{}
}

// newFleet makes the control plane's data dir with one folder per agent
// script (name → shell body run for each turn, $AGENT being the scripted
// agent) and starts the control plane.
func newFleet(t *testing.T, folders map[string]string) *fleetEnv {
	t.Helper()
	return newFleetOn(t, folders, "127.0.0.1")
}

// newFleetOn is newFleet with NATS and the control plane listening on host
// alone: the bridge address of simulated hosts, for runners in namespaces.
func newFleetOn(t *testing.T, folders map[string]string, host string) *fleetEnv {
	t.Helper()
	return startFleetEnv(t, folders, host, false)
}

// newSecureFleet is newFleet on one node run from the shipped NATS config:
// the control plane and each runner connect with their own nkey over TLS.
// Runners must be named after the config's identities (runner-1, runner-2).
func newSecureFleet(t *testing.T, folders map[string]string) *fleetEnv {
	t.Helper()
	return startFleetEnv(t, folders, "127.0.0.1", true)
}

func startFleetEnv(t *testing.T, folders map[string]string, host string, secure bool) *fleetEnv {
	t.Helper()
	f := &fleetEnv{t: t, live: t.TempDir(), runners: map[string]*runnerProc{}}
	extra := ""
	if secure {
		f.secure = natstest.StartShipped(t, host)
		f.nats = f.secure.Cluster
		extra = fmt.Sprintf("nkey = %q\nca = %q\n", f.secure.Seed("control-plane"), f.secure.CA)
	} else {
		f.nats = natstest.StartOn(t, 3, host)
	}
	f.data, f.env = initData(t)
	cfg := fmt.Sprintf("[fleet]\nnats = %q\nlease_ttl = %q\n%s", f.nats.URL(), fleetLeaseTTL.String(), extra)
	if err := os.WriteFile(filepath.Join(f.data, "arizuko.toml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	_, file, _, _ := runtime.Caller(0)
	agent := filepath.Join(filepath.Dir(file), "..", "..", "examples", "agents", "scripted", "agent.py")
	for name, body := range folders {
		script := filepath.Join(f.live, name+".sh")
		sh := fmt.Sprintf("#!/bin/sh\nAGENT=%q\nLIVE=%q\n%s\n", agent, f.live, body)
		if err := os.WriteFile(script, []byte(sh), 0o755); err != nil {
			t.Fatal(err)
		}
		mustAz(t, f.env, "folder", "add", name, "--agent", "sh "+script)
	}
	f.token = strings.TrimSpace(readFile(t, filepath.Join(f.data, "token")))
	f.addr = net.JoinHostPort(host, strconv.Itoa(nettest.FreePort(t, host)))
	f.client = api.NewClient("http://"+f.addr, f.token)
	f.startCP()
	t.Cleanup(func() {
		f.stopCP(syscall.SIGKILL)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, r := range f.runners {
			r.cmd.Process.Kill()
			<-r.done
		}
		if t.Failed() {
			t.Logf("control plane log:\n%s", f.cpLogs)
			for _, r := range f.runners {
				t.Logf("runner %s log:\n%s", r.name, r.logs)
			}
		}
	})
	return f
}

// runnerToken makes a token of kind runner through the control plane.
func (f *fleetEnv) runnerToken(name string) string {
	var nt service.NewToken
	if err := daemonCall(context.Background(), "http://"+f.addr, f.token, "POST", "/v1/tokens", service.TokenIn{Name: name, Kind: service.KindRunner}, &nt); err != nil {
		f.t.Fatalf("runner token %s: %v", name, err)
	}
	return nt.Secret
}

func (f *fleetEnv) startCP() {
	f.t.Helper()
	f.cpLogs = &nettest.Buffer{}
	args := []string{"serve", "--listen", f.addr, "--log-level", "info"}
	if f.secure == nil {
		args = append(args, "--insecure-nats")
	}
	f.cp = exec.Command(binary, args...)
	f.cp.Env = f.env
	f.cp.Stdout, f.cp.Stderr = f.cpLogs, f.cpLogs
	if err := f.cp.Start(); err != nil {
		f.t.Fatal(err)
	}
	f.waitFor(30*time.Second, "control plane /health", func() bool {
		resp, err := http.Get("http://" + f.addr + "/health")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

func (f *fleetEnv) stopCP(sig syscall.Signal) {
	if f.cp != nil && f.cp.Process != nil {
		f.cp.Process.Signal(sig)
		f.cp.Wait()
		f.cp = nil
	}
}

// startRunner runs `arizuko runner` with its own data dir, agents on the host.
func (f *fleetEnv) startRunner(name, token string, capacity int, extra ...string) *runnerProc {
	f.t.Helper()
	return f.startRunnerIn(nil, name, token, capacity, extra...)
}

// startRunnerIn is startRunner inside simulated host x (nil: this host).
func (f *fleetEnv) startRunnerIn(x *nettest.Host, name, token string, capacity int, extra ...string) *runnerProc {
	f.t.Helper()
	r := &runnerProc{name: name, data: filepath.Join(f.t.TempDir(), name), logs: &nettest.Buffer{}, done: make(chan struct{})}
	// A runner started again under its name is its host restarting it: same data dir.
	f.mu.Lock()
	if old := f.runners[name]; old != nil {
		r.data = old.data
	}
	f.mu.Unlock()
	args := append([]string{"runner", "--nats", f.nats.URL(), "--server", "http://" + f.addr, "--token", token,
		"--capacity", fmt.Sprint(capacity), "--unsafe-host-agent", "--log-level", "info"}, f.runnerNATS(name)...)
	args = append(args, extra...)
	r.cmd = exec.Command(binary, args...)
	if x != nil {
		r.cmd = x.Command(binary, args...)
	}
	r.cmd.Env = env(f.t, r.data)
	r.cmd.Stdout, r.cmd.Stderr = r.logs, r.logs
	if err := r.cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	f.mu.Lock()
	f.runners[name] = r
	f.mu.Unlock()
	return r
}

// runnerNATS are the NATS flags of runner name: its own identity on a
// secure fleet, --insecure-nats otherwise.
func (f *fleetEnv) runnerNATS(name string) []string {
	if f.secure == nil {
		return []string{"--insecure-nats"}
	}
	return []string{"--nats-nkey", f.secure.Seed(name), "--nats-ca", f.secure.CA}
}

// waitPulling waits until each named runner has started pulling turns.
func (f *fleetEnv) waitPulling(names ...string) {
	f.t.Helper()
	for _, n := range names {
		f.mu.Lock()
		r := f.runners[n]
		f.mu.Unlock()
		f.waitFor(60*time.Second, "runner "+n+" pulling turns", func() bool {
			return strings.Contains(r.logs.String(), "runner pulling turns")
		})
	}
}

func (f *fleetEnv) waitFor(d time.Duration, what string, ok func() bool) {
	f.t.Helper()
	eventually.True(f.t, d, what, ok)
}

// say posts text into the folder's web chat and returns the stored message.
func (f *fleetEnv) say(folder, text string) store.Message {
	f.t.Helper()
	ctx := service.WithPrincipal(context.Background(), service.AdminPrincipal)
	in, err := f.client.PostMessage(ctx, service.MessageIn{ChatJID: "web:" + folder, Sender: "tester", Text: text})
	if err != nil {
		f.t.Fatalf("post to %s: %v", folder, err)
	}
	return in.Message
}

// replies lists what the folder's chat got back.
func (f *fleetEnv) replies(folder string) []store.Message {
	f.t.Helper()
	ms, err := f.client.ListMessages(context.Background(), "web:"+folder, 0, 1000)
	if err != nil {
		f.t.Fatalf("messages of %s: %v", folder, err)
	}
	var out []store.Message
	for _, m := range ms {
		if m.Direction == "out" {
			out = append(out, m)
		}
	}
	return out
}

// lines reads a trace file the agents append to.
func (f *fleetEnv) lines(name string) []string {
	b, err := os.ReadFile(filepath.Join(f.live, name))
	if err != nil {
		return nil
	}
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// leaseEvent is one change of a folder lease, as the KV bucket recorded it.
type leaseEvent struct {
	key   string
	op    jetstream.KeyValueOp
	lease dispatch.Lease
	at    time.Time
}

// recordLeases watches the lease bucket and returns the history so far.
func (f *fleetEnv) recordLeases() func() []leaseEvent {
	f.t.Helper()
	js, err := jetstream.New(f.nats.Connect())
	if err != nil {
		f.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	f.t.Cleanup(cancel)
	kv, err := js.KeyValue(ctx, dispatch.LeaseBucket)
	if err != nil {
		f.t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		f.t.Fatal(err)
	}
	var mu sync.Mutex
	var hist []leaseEvent
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			ev := leaseEvent{key: e.Key(), op: e.Operation(), at: e.Created()}
			json.Unmarshal(e.Value(), &ev.lease)
			mu.Lock()
			hist = append(hist, ev)
			mu.Unlock()
		}
	}()
	return func() []leaseEvent {
		mu.Lock()
		defer mu.Unlock()
		return append([]leaseEvent(nil), hist...)
	}
}

// overlaps finds two holders of one folder's lease at once: a new dispatch
// taking the key while the previous one was neither released nor expired.
func overlaps(hist []leaseEvent) []string {
	type held struct {
		l    dispatch.Lease
		last time.Time
	}
	cur := map[string]*held{}
	var bad []string
	for _, e := range hist {
		h := cur[e.key]
		if e.op != jetstream.KeyValuePut {
			delete(cur, e.key)
			continue
		}
		if h != nil && h.l.Dispatch != e.lease.Dispatch && e.at.Sub(h.last) < fleetLeaseTTL {
			bad = append(bad, fmt.Sprintf("%s: %s took it at %s while %s held it (renewed %s)", e.key, e.lease.Runner,
				e.at.Format(time.StampMilli), h.l.Runner, h.last.Format(time.StampMilli)))
		}
		cur[e.key] = &held{l: e.lease, last: e.at}
	}
	return bad
}

// readLease reads a folder's lease from the bucket, as any NATS client of the fleet can.
func readLease(nc *nats.Conn, folder string) (dispatch.Lease, error) {
	var l dispatch.Lease
	js, err := jetstream.New(nc)
	if err != nil {
		return l, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	kv, err := js.KeyValue(ctx, dispatch.LeaseBucket)
	if err != nil {
		return l, err
	}
	e, err := kv.Get(ctx, dispatch.LeaseKey(folder))
	if err != nil {
		return l, err
	}
	return l, json.Unmarshal(e.Value(), &l)
}
