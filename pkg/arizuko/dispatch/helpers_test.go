package dispatch

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/natstest"
	"github.com/crackbox/crackbox/internal/nettest"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
)

var quiet = slog.New(slog.DiscardHandler)

// planeLog keeps what the dispatcher, the queue and the runners log, and
// prints it only when the test fails: their timing is what a failure needs.
func planeLog(tb testing.TB) *slog.Logger {
	buf := &nettest.Buffer{}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("control plane and runner log:\n%s", buf)
		}
	})
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

const adminToken = "test-token-0123456789"

// plane is an in-process control plane: a store, its queue and, with a
// fleet, a dispatcher on a real JetStream cluster behind the real API.
type plane struct {
	ctx   context.Context
	l     *service.Local
	q     *turn.Queue
	d     *Dispatcher
	setup Setup
	url   string
	log   *slog.Logger
}

func newPlane(tb testing.TB, fleet bool, ttl time.Duration, require func(string) []string, local turn.Runner, folders ...string) *plane {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	data := tb.TempDir()
	l, err := service.Open(ctx, service.Options{DataDir: data, Create: true})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.Close() })
	if err := l.Bootstrap(ctx); err != nil {
		tb.Fatal(err)
	}
	actx := service.WithPrincipal(ctx, service.AdminPrincipal)
	for _, f := range folders {
		if _, err := l.AddFolder(actx, store.Folder{Path: f, AgentCommand: []string{"agent"}}); err != nil {
			tb.Fatal(err)
		}
	}
	p := &plane{ctx: ctx, l: l, log: planeLog(tb)}
	g := gated.New(gated.Options{Store: l.Store(), Gate: l.Gate(), Control: l, DataDir: data, Log: p.log})
	runner := local
	if fleet {
		c := natstest.Start(tb, 3)
		js, err := jetstream.New(c.Connect())
		if err != nil {
			tb.Fatal(err)
		}
		if p.setup, err = Ensure(ctx, js, ttl, 3, p.log); err != nil {
			tb.Fatal(err)
		}
		p.d = NewDispatcher(Options{JS: js, Setup: p.setup, Gated: g, Gate: l.Gate(), Require: require, LeaseTTL: ttl, Log: p.log})
		srv := api.NewServer(l, map[string]string{adminToken: service.AdminPrincipal}).WithTokens(l)
		p.d.Register(srv)
		hs := httptest.NewServer(srv)
		tb.Cleanup(hs.Close)
		p.url = hs.URL
		runner = p.d
	}
	p.q = turn.New(turn.Options{Store: l.Store(), Gate: l.Gate(), Control: l, Gated: g, Runner: runner, DataDir: data,
		Sweep: time.Hour, RetryDelay: 50 * time.Millisecond, Log: p.log})
	done := make(chan struct{})
	go func() { p.q.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	return p
}

// runner starts an in-process runner named id (a runner token of that name)
// and returns its data dir.
func (p *plane) runner(tb testing.TB, id string, labels []string, exec turn.Runner) string {
	tb.Helper()
	tok := adminToken
	if id != "admin" {
		nt, err := p.l.AddToken(service.WithPrincipal(p.ctx, service.AdminPrincipal), service.TokenIn{Name: id, Kind: service.KindRunner})
		if err != nil {
			tb.Fatal(err)
		}
		tok = nt.Secret
	}
	ctx, cancel := context.WithCancel(p.ctx)
	data := tb.TempDir()
	r, err := NewRunner(ctx, RunnerOptions{ID: id, Capacity: 2, Labels: labels, Setup: p.setup, Client: &Client{URL: p.url, Token: tok},
		Exec: exec, DataDir: data, Log: p.log.With("runner", id)})
	if err != nil {
		tb.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Run(ctx); close(done) }()
	tb.Cleanup(func() { cancel(); <-done })
	return data
}

// post stores a message for folder's chat and wakes its worker.
func (p *plane) post(tb testing.TB, folder, text string) {
	tb.Helper()
	ctx := service.WithPrincipal(p.ctx, service.AdminPrincipal)
	if _, err := p.l.PostMessage(ctx, service.MessageIn{ChatJID: "web:" + folder, Sender: "t", Text: text}); err != nil {
		tb.Fatal(err)
	}
	p.q.Kick(folder)
}

// idle reports whether no turn is open and no message waits.
func (p *plane) idle(tb testing.TB) bool {
	w, err := p.l.Store().PendingWork(p.ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return len(w) == 0
}
