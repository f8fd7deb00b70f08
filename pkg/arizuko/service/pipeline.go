package service

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/delivery"
	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// MaxTurnBudget bounds a turns-per-day setting; past it, say 0 (unlimited).
const MaxTurnBudget = 1_000_000

// BudgetWindow is the sliding window a turn budget counts over.
const BudgetWindow = 24 * time.Hour

// TurnDetail is a turn with what it read and what it sent.
type TurnDetail struct {
	store.Turn
	Messages []store.Message  `json:"messages"`
	Outbound []store.Outbound `json:"outbound"`
	// Outputs are the kept tails of the agent's output, one per attempt.
	Outputs []store.TurnOutput `json:"outputs"`
}

// FolderBudget is a folder's turn budget and what it used of it.
type FolderBudget struct {
	Folder string `json:"folder"`
	// Own is the folder's own setting; nil uses the instance default.
	Own *int `json:"max_turns_per_day"`
	// Effective is the cap in force, 0 = unlimited.
	Effective int `json:"effective"`
	// Used counts the turns started in the last BudgetWindow.
	Used int `json:"used_24h"`
}

// BudgetIn sets a folder's cap, or with nil returns it to the instance default.
type BudgetIn struct {
	MaxTurnsPerDay *int `json:"max_turns_per_day"`
}

// EffectiveBudget is the one budget rule: a folder's own turns-per-day cap
// if set, else the instance default def; 0 means unlimited. own is the
// folder's setting, nil when it has none.
func EffectiveBudget(ctx context.Context, st *store.Store, f string, def int) (n int, own *int, err error) {
	n, set, err := st.TurnBudget(ctx, f)
	if err != nil {
		return 0, nil, err
	}
	if set {
		return max(n, 0), &n, nil
	}
	return max(def, 0), nil, nil
}

// TurnBudgetDefault is the instance default of the per-folder turn budget,
// the one the turn queue enforces too.
func (l *Local) TurnBudgetDefault() int { return l.opts.MaxTurnsPerDay }

// ListTurns lists the newest turns, all or one folder's.
func (l *Local) ListTurns(ctx context.Context, f string, limit int) ([]store.Turn, error) {
	if f != "" {
		if err := l.check(ctx, "turn:read", f); err != nil {
			return nil, err
		}
		return l.st.ListTurns(ctx, f, limit)
	}
	show, err := l.visible(ctx, "turn:read")
	if err != nil {
		return nil, err
	}
	ts, err := l.st.ListTurns(ctx, f, limit)
	return filter(ts, show, func(t store.Turn) string { return t.Folder }), err
}

// GetTurn returns a turn with its messages and replies.
func (l *Local) GetTurn(ctx context.Context, id int64) (TurnDetail, error) {
	t, err := l.st.GetTurn(ctx, id)
	if err != nil {
		// Existence is not secret from a caller who may read some turns,
		// but the check still runs so a stranger is audited either way.
		if cerr := l.check(ctx, "turn:read", ""); cerr != nil {
			return TurnDetail{}, cerr
		}
		return TurnDetail{}, err
	}
	if err := l.check(ctx, "turn:read", t.Folder); err != nil {
		return TurnDetail{}, err
	}
	d := TurnDetail{Turn: t}
	if d.Messages, err = l.st.TurnMessages(ctx, t); err != nil {
		return d, err
	}
	if d.Outbound, err = l.st.TurnOutbound(ctx, id); err != nil {
		return d, err
	}
	d.Outputs, err = l.st.TurnOutputs(ctx, id)
	return d, err
}

// GetBudget shows a folder's turn budget and its use.
func (l *Local) GetBudget(ctx context.Context, f string) (FolderBudget, error) {
	if err := folder.Validate(f); err != nil {
		return FolderBudget{}, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if err := l.check(ctx, "folder:read", f); err != nil {
		return FolderBudget{}, err
	}
	return l.budget(ctx, f)
}

func (l *Local) budget(ctx context.Context, f string) (FolderBudget, error) {
	n, own, err := EffectiveBudget(ctx, l.st, f, l.opts.MaxTurnsPerDay)
	if err != nil {
		return FolderBudget{}, err
	}
	b := FolderBudget{Folder: f, Own: own, Effective: n}
	b.Used, err = l.st.TurnsStartedSince(ctx, f, time.Now().Add(-BudgetWindow).UnixMilli(), 0)
	return b, err
}

// SetBudget sets a folder's turn budget (folder:budget).
func (l *Local) SetBudget(ctx context.Context, f string, in BudgetIn) (FolderBudget, error) {
	if err := folder.Validate(f); err != nil {
		return FolderBudget{}, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	n := -1
	if in.MaxTurnsPerDay != nil {
		n = *in.MaxTurnsPerDay
		if n < 0 || n > MaxTurnBudget {
			return FolderBudget{}, invalid("turn budget %d: want 0 (unlimited) to %d turns per day, or default", n, MaxTurnBudget)
		}
	}
	if err := l.check(ctx, "folder:budget", f); err != nil {
		return FolderBudget{}, err
	}
	if err := l.st.SetTurnBudget(ctx, f, n); err != nil {
		return FolderBudget{}, err
	}
	return l.budget(ctx, f)
}

// SetAdapter registers or replaces a platform's callback. Every call to it
// is signed with the adapter's secret: the caller's, or one made here and
// answered once.
func (l *Local) SetAdapter(ctx context.Context, a store.Adapter) (store.Adapter, error) {
	if err := ValidPlatform(a.Platform); err != nil {
		return a, err
	}
	if err := delivery.ValidCallback(a.CallbackURL); err != nil {
		return a, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	if a.Secret == "" {
		var b [24]byte
		if _, err := rand.Read(b[:]); err != nil {
			return a, err
		}
		a.Secret = hex.EncodeToString(b[:])
	}
	if len(a.Secret) < 16 || len(a.Secret) > 256 {
		return a, invalid("adapter secret is %d bytes: want 16..256 (or none, and the daemon makes one)", len(a.Secret))
	}
	if err := l.check(ctx, "adapter:set", ""); err != nil {
		return a, err
	}
	return a, l.st.SetAdapter(ctx, a)
}

// RemoveAdapter unregisters a platform.
func (l *Local) RemoveAdapter(ctx context.Context, platform string) error {
	if err := l.check(ctx, "adapter:rm", ""); err != nil {
		return err
	}
	err := l.st.DeleteAdapter(ctx, platform)
	if errors.Is(err, store.ErrNotFound) {
		return fmt.Errorf("adapter %q: %w", platform, ErrNotFound)
	}
	return err
}
