package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/api"
	"github.com/crackbox/crackbox/pkg/folder"
	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
	"github.com/crackbox/crackbox/pkg/turn"
)

// maxTurnBudget bounds a turns-per-day setting; past it, say 0 (unlimited).
const maxTurnBudget = 1_000_000

// FolderBudget is a folder's turn budget and what it used of it.
type FolderBudget struct {
	Folder string `json:"folder"`
	// Own is the folder's own setting; nil uses the instance default.
	Own *int `json:"max_turns_per_day"`
	// Effective is the cap in force, 0 = unlimited.
	Effective int `json:"effective"`
	// Used counts the turns started in the last 24 h.
	Used int `json:"used_24h"`
}

// budgetSet is the body of PUT /v1/budgets/{folder}: a cap, or null to
// return the folder to the instance default.
type budgetSet struct {
	MaxTurnsPerDay *int `json:"max_turns_per_day"`
}

func readBudget(ctx context.Context, st *store.Store, f string, def int) (FolderBudget, error) {
	n, set, err := st.TurnBudget(ctx, f)
	if err != nil {
		return FolderBudget{}, err
	}
	b := FolderBudget{Folder: f, Effective: max(def, 0)}
	if set {
		b.Own, b.Effective = &n, n
	}
	b.Used, err = st.TurnsStartedSince(ctx, f, time.Now().Add(-turn.BudgetWindow).UnixMilli(), 0)
	return b, err
}

func writeBudget(ctx context.Context, st *store.Store, f string, in budgetSet) error {
	n := -1
	if in.MaxTurnsPerDay != nil {
		n = *in.MaxTurnsPerDay
		if n < 0 || n > maxTurnBudget {
			return fmt.Errorf("turn budget %d: want 0 (unlimited) to %d turns per day, or default: %w", n, maxTurnBudget, service.ErrInvalid)
		}
	}
	err := st.SetTurnBudget(ctx, f, n)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("%w: %w", err, service.ErrNotFound)
	}
	return err
}

// budget serves GET and PUT /v1/budgets/{folder}.
func (a *turnsAPI) budget(w http.ResponseWriter, r *http.Request) error {
	f := r.PathValue("folder")
	if err := folder.Validate(f); err != nil {
		return fmt.Errorf("%w: %w", err, service.ErrInvalid)
	}
	ctx, p := r.Context(), service.Principal(r.Context())
	switch r.Method {
	case http.MethodGet:
		if err := a.l.Gate().Check(ctx, p, "folder:read", f); err != nil {
			return err
		}
	case http.MethodPut:
		var in budgetSet
		if err := api.Decode(w, r, &in); err != nil {
			return err
		}
		if err := a.l.Gate().Check(ctx, p, "folder:budget", f); err != nil {
			return err
		}
		if err := writeBudget(ctx, a.st, f, in); err != nil {
			return err
		}
	}
	b, err := readBudget(ctx, a.st, f, a.maxTurns)
	if errors.Is(err, store.ErrNotFound) {
		err = fmt.Errorf("%w: %w", err, service.ErrNotFound)
	}
	if err != nil {
		return err
	}
	return api.WriteJSON(w, http.StatusOK, b)
}

// folderBudget shows, and with set changes, a folder's budget through the
// daemon, or on the data dir when no daemon runs.
func folderBudget(ctx context.Context, cfg *Config, f string, set *budgetSet) (FolderBudget, error) {
	var b FolderBudget
	base, token, err := daemonEndpoint(cfg)
	if err == nil {
		path := "/v1/budgets/" + url.PathEscape(f)
		if set != nil {
			return b, daemonCall(ctx, base, token, http.MethodPut, path, set, &b)
		}
		return b, daemonCall(ctx, base, token, http.MethodGet, path, nil, &b)
	}
	if !errors.Is(err, errNoDaemon) {
		return b, err
	}
	err = withService(ctx, func(ctx context.Context, s service.Service) error {
		l, ok := s.(*service.Local)
		if !ok {
			return errors.New("a daemon started meanwhile; run the command again")
		}
		action := "folder:read"
		if set != nil {
			action = "folder:budget"
		}
		if err := l.Gate().Check(ctx, service.Principal(ctx), action, f); err != nil {
			return err
		}
		if set != nil {
			if err := writeBudget(ctx, l.Store(), f, *set); err != nil {
				return err
			}
		}
		b, err = readBudget(ctx, l.Store(), f, cfg.Turns.MaxTurnsPerDay)
		return err
	})
	return b, err
}

// parseBudget reads N (0 = unlimited) or "default".
func parseBudget(s string) (budgetSet, error) {
	if s == "default" {
		return budgetSet{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > maxTurnBudget {
		return budgetSet{}, fmt.Errorf("turn budget %q: want 0 (unlimited) to %d turns per day, or default: %w", s, maxTurnBudget, service.ErrInvalid)
	}
	return budgetSet{MaxTurnsPerDay: &n}, nil
}

// This file sorts after folders.go, so the folder command exists here.
// newBudgetCmd is `arizuko folder budget`.
func newBudgetCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "budget FOLDER [N|default]",
		Short: "Show or set a folder's turn budget (turns per sliding 24 h; 0 = unlimited)",
		Long: `Show a folder's turn budget and its use over the last 24 hours, or set it:
N caps the folder at N turns started per sliding 24 h (0 = unlimited),
"default" returns it to [turns] max_turns_per_day. A turn past the budget
fails as quota-exhausted without starting a guest; its messages stay stored
and the chat is told.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := folder.Validate(args[0]); err != nil {
				return err
			}
			var set *budgetSet
			if len(args) == 2 {
				in, err := parseBudget(args[1])
				if err != nil {
					return err
				}
				set = &in
			}
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			b, err := folderBudget(cmd.Context(), cfg, args[0], set)
			if err != nil || flagJSON {
				return jsonOr(b, err)
			}
			src := "instance default"
			if b.Own != nil {
				src = "folder setting"
			}
			limit := "unlimited"
			if b.Effective > 0 {
				limit = fmt.Sprintf("%d per day", b.Effective)
			}
			fmt.Printf("%s: %s (%s); %d turns started in the last 24h\n", b.Folder, limit, src, b.Used)
			return nil
		},
	}
}
