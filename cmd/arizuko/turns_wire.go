package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/delivery"
	"github.com/crackbox/crackbox/pkg/arizuko/dispatch"
	"github.com/crackbox/crackbox/pkg/arizuko/email"
	"github.com/crackbox/crackbox/pkg/arizuko/gated"
	"github.com/crackbox/crackbox/pkg/arizuko/hook"
	"github.com/crackbox/crackbox/pkg/arizuko/schedule"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/arizuko/webchat"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/proxy"
)

// TurnsConfig is the [turns] section of arizuko.toml.
type TurnsConfig struct {
	// MaxConcurrentGuests caps live guests for the instance (default 5).
	MaxConcurrentGuests int `toml:"max_concurrent_guests"`
	// NetMode is the guests' network: auto (default), tap, proxy-only or none.
	NetMode   string `toml:"net_mode"`
	Kernel    string `toml:"kernel"`
	GuestInit string `toml:"guest_init"`
	Accel     string `toml:"accel"`
	// GuestHome is where the folder's home (<data>/homes/<name>) appears in the guest (default /home/node).
	GuestHome   string          `toml:"guest_home"`
	TurnTimeout config.Duration `toml:"turn_timeout"`
	// MaxDelegationDepth bounds delegate/escalate chains (default 3).
	MaxDelegationDepth int `toml:"max_delegation_depth"`
	// ObserveWindowMessages and ObserveWindowChars cap the observed context;
	// $ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES and _CHARS win (see loadConfig).
	ObserveWindowMessages int `toml:"observe_window_messages"`
	ObserveWindowChars    int `toml:"observe_window_chars"`
	// CredentialKeys are folder secrets every agent gets (its model credential).
	CredentialKeys []string `toml:"credential_keys"`
	// MaxTurnsPerDay (given to service.Open) caps each folder's turns over a sliding 24 h (0 =
	// unlimited); `arizuko folder budget FOLDER N` overrides it per folder.
	MaxTurnsPerDay int `toml:"max_turns_per_day"`

	proxy proxy.Options // built from [proxy] by loadConfig
	fleet FleetConfig   // [fleet] and --nats, set by serve
	email email.Config  // [email], set by serve
}

func (tc TurnsConfig) validate() error {
	switch tc.NetMode {
	case "", netjail.ModeAuto, jail.NetTap, jail.NetProxyOnly, jail.NetNone:
	default:
		return fmt.Errorf("turns.net_mode %q: want auto, tap, proxy-only or none", tc.NetMode)
	}
	switch {
	case tc.MaxConcurrentGuests < 0 || tc.MaxConcurrentGuests > 1000:
		return fmt.Errorf("turns.max_concurrent_guests %d: want 0 (default 5) to 1000", tc.MaxConcurrentGuests)
	case tc.MaxDelegationDepth < 0 || tc.MaxDelegationDepth > 32:
		return fmt.Errorf("turns.max_delegation_depth %d: want 0 (default 3) to 32", tc.MaxDelegationDepth)
	case tc.MaxTurnsPerDay < 0 || tc.MaxTurnsPerDay > service.MaxTurnBudget:
		return fmt.Errorf("turns.max_turns_per_day %d: want 0 (unlimited) to %d", tc.MaxTurnsPerDay, service.MaxTurnBudget)
	case tc.TurnTimeout.Duration < 0:
		return fmt.Errorf("turns.turn_timeout %s: want a positive duration", tc.TurnTimeout.Duration)
	case tc.GuestHome != "" && (!strings.HasPrefix(tc.GuestHome, "/") || tc.GuestHome == "/"):
		return fmt.Errorf("turns.guest_home %q: want an absolute path like /home/node", tc.GuestHome)
	}
	return nil
}

// newTurnRunner builds the runner of every turn: one guest per attempt.
// Tests of this package replace it with a host process.
var newTurnRunner = func(tc TurnsConfig) turn.Runner {
	return withCrackboxEnv(&turn.JailRunner{Kernel: tc.Kernel, GuestInit: tc.GuestInit, Accel: tc.Accel, NetMode: tc.NetMode,
		Timeout: tc.TurnTimeout.Duration, UID: -1, GID: -1, Proxy: tc.proxy, Log: slog.Default()}, os.LookupEnv)
}

// kickingService wakes the turn queue for every routed message it accepts,
// and the deliverer for every adapter it registers.
type kickingService struct {
	*service.Local
	q     *turn.Queue
	d     *delivery.Deliverer
	sched *schedule.Scheduler
}

func (k kickingService) AddSchedule(ctx context.Context, in service.ScheduleIn) (store.Schedule, error) {
	sc, err := k.Local.AddSchedule(ctx, in)
	if err == nil {
		k.sched.Wake()
	}
	return sc, err
}

func (k kickingService) SetAdapter(ctx context.Context, a store.Adapter) (store.Adapter, error) {
	out, err := k.Local.SetAdapter(ctx, a)
	if err == nil {
		k.d.Wake()
	}
	return out, err
}

func (k kickingService) PostMessage(ctx context.Context, in service.MessageIn) (service.Ingest, error) {
	ing, err := k.Local.PostMessage(ctx, in)
	if a := firstNonEmpty(in.Adapter, in.Platform); err == nil && a != "" {
		// Replies follow the adapter that last spoke in the chat, so a
		// terminal chat (its own adapter per session) hears its answers.
		if perr := k.Local.Store().SetChatPlatform(ctx, in.ChatJID, a); perr != nil {
			slog.Error("chat platform", "chat", in.ChatJID, "err", perr)
		}
	}
	if err == nil && ing.Route.Folder != "" && !ing.Route.Observe {
		k.q.Kick(ing.Route.Folder)
	}
	return ing, err
}

// startTurns starts the turn pipeline (queue, per-folder MCP sockets,
// delivery) on l and returns the daemon's HTTP handler: the API and the web
// chat, whose adapter is reached at self, the daemon's URL ("" leaves it
// unregistered). stop ends the pipeline; an open turn cut off by it runs
// again at the next start.
func startTurns(ctx context.Context, tc TurnsConfig, l *service.Local, token, self string) (http.Handler, func(), error) {
	if err := tc.validate(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	st := l.Store()
	d := delivery.New(delivery.Options{Store: st, Log: slog.Default()})
	var q *turn.Queue
	g := gated.New(gated.Options{
		Store: st, Gate: l.Gate(), Control: l, DataDir: l.DataDir(), MaxDepth: tc.MaxDelegationDepth,
		OnMessage: func(f, _ string) { q.Kick(f) }, OnOutbound: d.Wake, Log: slog.Default(),
	})
	runner := newTurnRunner(tc)
	stopFleet := func() {}
	var fleet *dispatch.Dispatcher
	var claims schedule.Claimer
	if tc.fleet.NATS != "" {
		var err error
		if fleet, claims, stopFleet, err = startFleet(ctx, tc.fleet, g, l.Gate(), l.Registry()); err != nil {
			cancel()
			return nil, nil, err
		}
		runner = fleet
		// Before the queue runs: a turn must not start from an empty home.
		if err := importLocalHomes(ctx, l, fleet.Homes(), tc.fleet.Home.limits); err != nil {
			slog.Error("homes on this host not imported into the fleet's store", "err", err)
		}
	}
	q = turn.New(turn.Options{
		Store: st, Gate: l.Gate(), Control: l, Gated: g, DataDir: l.DataDir(),
		Runner:          runner,
		MaxGuests:       tc.MaxConcurrentGuests,
		GuestHome:       tc.GuestHome,
		ObserveMessages: tc.ObserveWindowMessages,
		ObserveChars:    tc.ObserveWindowChars,
		CredentialKeys:  tc.CredentialKeys,
		MaxTurnsPerDay:  l.TurnBudgetDefault(),
		OnOutbound:      d.Wake,
		OnTurn:          d.TurnTyping,
		Log:             slog.Default(),
	})
	sched := &schedule.Scheduler{Store: st, Claim: claims, Log: slog.Default()}
	kick := kickingService{l, q, d, sched}
	sched.Fire = func(ctx context.Context, f schedule.Firing) error {
		return fireSchedule(ctx, l, kick.PostMessage, f)
	}
	var wg sync.WaitGroup
	wg.Add(3)
	go func() { defer wg.Done(); q.Run(ctx) }()
	go func() { defer wg.Done(); d.Run(ctx) }()
	go func() { defer wg.Done(); sched.Run(ctx) }()
	slog.Info("turn pipeline started", "max_guests", tc.MaxConcurrentGuests, "net", firstNonEmpty(tc.NetMode, "auto"))

	core := api.NewServer(kick, map[string]string{token: service.AdminPrincipal}).WithTokens(l).WithLog(slog.Default())
	hook.New(l, kick.PostMessage).Register(core)
	var homes homeKeeper = &localHomes{data: l.DataDir(), lim: tc.fleet.Home.limits}
	if fleet != nil {
		fleet.Register(core)
		homes = fleetHomes{s: fleet.Homes(), lim: tc.fleet.Home.limits}
		core.Note("fleet_nats", natsauth.Auth{Insecure: tc.fleet.insecure}.Describe())
	}
	registerHomes(core, l, homes)
	core.Handle("/v1/metrics", map[string]api.HandlerFunc{"GET": func(w http.ResponseWriter, r *http.Request) error {
		// Counts name tenants: the operator's and read tokens' alone.
		if err := l.Gate().Check(r.Context(), service.Principal(r.Context()), "audit:read", ""); err != nil {
			return err
		}
		l.Metrics().ServeHTTP(w, r)
		return nil
	}})
	wc := webchat.New(l, kick.PostMessage, 0)
	wc.Register(core)
	if self != "" {
		if err := wc.Attach(ctx, self); err != nil {
			cancel()
			wg.Wait()
			stopFleet()
			return nil, nil, fmt.Errorf("web chat adapter: %w", err)
		}
	}
	stopEmail, err := startEmail(ctx, tc.email, kick)
	if err != nil {
		cancel()
		wg.Wait()
		stopFleet()
		return nil, nil, err
	}
	return core, func() { stopEmail(); cancel(); wg.Wait(); stopFleet() }, nil
}

// errNoDaemon is returned by commands that need the running daemon.
var errNoDaemon = errors.New("no arizuko daemon is running on this data dir")
