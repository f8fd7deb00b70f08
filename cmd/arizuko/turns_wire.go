package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/crackbox/crackbox/pkg/api"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/delivery"
	"github.com/crackbox/crackbox/pkg/gated"
	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
	"github.com/crackbox/crackbox/pkg/turn"
	"github.com/crackbox/crackbox/pkg/webchat"
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
	// $OBSERVE_WINDOW_MESSAGES and $OBSERVE_WINDOW_CHARS win.
	ObserveWindowMessages int `toml:"observe_window_messages"`
	ObserveWindowChars    int `toml:"observe_window_chars"`
	// CredentialKeys are folder secrets every agent gets (its model credential).
	CredentialKeys []string `toml:"credential_keys"`
	// MaxTurnsPerDay caps each folder's turns over a sliding 24 h (0 =
	// unlimited); `arizuko folder budget FOLDER N` overrides it per folder.
	MaxTurnsPerDay int `toml:"max_turns_per_day"`
}

func (tc TurnsConfig) validate() error {
	switch tc.NetMode {
	case "", "auto", "tap", "proxy-only", "none":
	default:
		return fmt.Errorf("turns.net_mode %q: want auto, tap, proxy-only or none", tc.NetMode)
	}
	switch {
	case tc.MaxConcurrentGuests < 0 || tc.MaxConcurrentGuests > 1000:
		return fmt.Errorf("turns.max_concurrent_guests %d: want 0 (default 5) to 1000", tc.MaxConcurrentGuests)
	case tc.MaxDelegationDepth < 0 || tc.MaxDelegationDepth > 32:
		return fmt.Errorf("turns.max_delegation_depth %d: want 0 (default 3) to 32", tc.MaxDelegationDepth)
	case tc.MaxTurnsPerDay < 0 || tc.MaxTurnsPerDay > maxTurnBudget:
		return fmt.Errorf("turns.max_turns_per_day %d: want 0 (unlimited) to %d", tc.MaxTurnsPerDay, maxTurnBudget)
	case tc.TurnTimeout.Duration < 0:
		return fmt.Errorf("turns.turn_timeout %s: want a positive duration", tc.TurnTimeout.Duration)
	case tc.GuestHome != "" && (!strings.HasPrefix(tc.GuestHome, "/") || tc.GuestHome == "/"):
		return fmt.Errorf("turns.guest_home %q: want an absolute path like /home/node", tc.GuestHome)
	}
	return nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// newTurnRunner builds the runner of every turn: one guest per attempt.
// Tests of this package replace it with a host process.
var newTurnRunner = func(tc TurnsConfig) turn.Runner {
	return &turn.JailRunner{Kernel: tc.Kernel, GuestInit: tc.GuestInit, Accel: tc.Accel, NetMode: tc.NetMode,
		Timeout: tc.TurnTimeout.Duration, UID: -1, GID: -1}
}

// kickingService wakes the turn queue for every routed message it accepts.
type kickingService struct {
	*service.Local
	q *turn.Queue
}

func (k kickingService) PostMessage(ctx context.Context, in service.MessageIn) (service.Ingest, error) {
	ing, err := k.Local.PostMessage(ctx, in)
	if err == nil && in.Platform != "" {
		// Replies follow the adapter that last spoke in the chat, so a
		// terminal chat (its own platform per session) hears its answers.
		if perr := k.Local.Store().SetChatPlatform(ctx, in.ChatJID, in.Platform); perr != nil {
			slog.Error("chat platform", "chat", in.ChatJID, "err", perr)
		}
	}
	if err == nil && ing.Route.Folder != "" && !ing.Route.Observe {
		k.q.Kick(ing.Route.Folder)
	}
	return ing, err
}

// startTurns starts the turn pipeline (queue, per-folder MCP sockets,
// delivery) on l and returns the daemon's HTTP handler: the core API plus
// /v1/adapters, /v1/turns, /v1/budgets and the web chat, whose adapter is
// reached at self, the daemon's URL ("" leaves it unregistered). stop ends the pipeline; an open turn cut off by
// it runs again at the next start.
func startTurns(ctx context.Context, tc TurnsConfig, l *service.Local, token, self string) (http.Handler, func(), error) {
	if err := tc.validate(); err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	st := l.Store()
	d := delivery.New(delivery.Options{Store: st})
	var q *turn.Queue
	g := gated.New(gated.Options{
		Store: st, Gate: l.Gate(), Control: l, DataDir: l.DataDir(), MaxDepth: tc.MaxDelegationDepth,
		OnMessage: func(f, _ string) { q.Kick(f) }, OnOutbound: d.Wake,
	})
	q = turn.New(turn.Options{
		Store: st, Gate: l.Gate(), Control: l, Gated: g, DataDir: l.DataDir(),
		Runner:          newTurnRunner(tc),
		MaxGuests:       tc.MaxConcurrentGuests,
		GuestHome:       tc.GuestHome,
		ObserveMessages: envInt("OBSERVE_WINDOW_MESSAGES", tc.ObserveWindowMessages),
		ObserveChars:    envInt("OBSERVE_WINDOW_CHARS", tc.ObserveWindowChars),
		CredentialKeys:  tc.CredentialKeys,
		MaxTurnsPerDay:  tc.MaxTurnsPerDay,
		OnOutbound:      d.Wake,
	})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); q.Run(ctx) }()
	go func() { defer wg.Done(); d.Run(ctx) }()
	slog.Info("turn pipeline started", "max_guests", tc.MaxConcurrentGuests, "net", firstNonEmpty(tc.NetMode, "auto"))

	core := api.NewServer(kickingService{l, q}, map[string]string{token: service.AdminPrincipal}).WithTokens(l)
	ext := &turnsAPI{l: l, st: st, d: d, maxTurns: tc.MaxTurnsPerDay}
	core.Handle("/v1/adapters", map[string]api.HandlerFunc{"POST": ext.setAdapter})
	core.Handle("/v1/adapters/{platform}", map[string]api.HandlerFunc{"DELETE": ext.deleteAdapter})
	core.Handle("/v1/turns", map[string]api.HandlerFunc{"GET": ext.listTurns})
	core.Handle("/v1/turns/{id}", map[string]api.HandlerFunc{"GET": ext.showTurn})
	core.Handle("/v1/budgets/{folder...}", map[string]api.HandlerFunc{"GET": ext.budget, "PUT": ext.budget})
	wc := webchat.New(l, kickingService{l, q}.PostMessage, 0)
	wc.Register(core)
	if self != "" {
		if err := wc.Attach(ctx, self); err != nil {
			cancel()
			wg.Wait()
			return nil, nil, fmt.Errorf("web chat adapter: %w", err)
		}
	}
	return core, func() { cancel(); wg.Wait() }, nil
}

// turnsAPI serves the pipeline's endpoints on the core API's server, behind
// its tokens and error envelope; every request is authorized by the acl gate.
type turnsAPI struct {
	l  *service.Local
	st *store.Store
	d  *delivery.Deliverer
	// maxTurns is the instance default of the per-folder turn budget.
	maxTurns int
}

func (a *turnsAPI) setAdapter(w http.ResponseWriter, r *http.Request) error {
	var in store.Adapter
	if err := api.Decode(w, r, &in); err != nil {
		return err
	}
	if err := service.ValidPlatform(in.Platform); err != nil {
		return err
	}
	if err := delivery.ValidCallback(in.CallbackURL); err != nil {
		return fmt.Errorf("%w: %w", err, service.ErrInvalid)
	}
	if err := a.l.Gate().Check(r.Context(), service.Principal(r.Context()), "adapter:set", ""); err != nil {
		return err
	}
	if err := a.st.SetAdapter(r.Context(), in); err != nil {
		return err
	}
	a.d.Wake()
	return api.WriteJSON(w, http.StatusOK, in)
}

func (a *turnsAPI) deleteAdapter(w http.ResponseWriter, r *http.Request) error {
	if err := a.l.Gate().Check(r.Context(), service.Principal(r.Context()), "adapter:rm", ""); err != nil {
		return err
	}
	if err := a.st.DeleteAdapter(r.Context(), r.PathValue("platform")); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *turnsAPI) listTurns(w http.ResponseWriter, r *http.Request) error {
	f := r.URL.Query().Get("folder")
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	if err := a.l.Gate().Check(r.Context(), service.Principal(r.Context()), "turn:read", f); err != nil {
		return err
	}
	ts, err := a.st.ListTurns(r.Context(), f, limit)
	if err != nil {
		return err
	}
	if ts == nil {
		ts = []store.Turn{}
	}
	return api.WriteJSON(w, http.StatusOK, ts)
}

// TurnDetail is a turn with what it read and what it sent.
type TurnDetail struct {
	store.Turn
	Messages []store.Message  `json:"messages"`
	Outbound []store.Outbound `json:"outbound"`
}

func (a *turnsAPI) showTurn(w http.ResponseWriter, r *http.Request) error {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil {
		return fmt.Errorf("turn id %q: want a number: %w", r.PathValue("id"), service.ErrInvalid)
	}
	d, err := turnDetail(r.Context(), a.st, id)
	if err != nil {
		return err
	}
	if err := a.l.Gate().Check(r.Context(), service.Principal(r.Context()), "turn:read", d.Folder); err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, d)
}

func turnDetail(ctx context.Context, st *store.Store, id int64) (TurnDetail, error) {
	t, err := st.GetTurn(ctx, id)
	if err != nil {
		return TurnDetail{}, err
	}
	d := TurnDetail{Turn: t}
	if d.Messages, err = st.TurnMessages(ctx, t); err != nil {
		return d, err
	}
	d.Outbound, err = st.TurnOutbound(ctx, id)
	return d, err
}

// errNoDaemon is returned by commands that need the running daemon.
var errNoDaemon = errors.New("no arizuko daemon is running on this data dir")
