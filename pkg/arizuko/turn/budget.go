package turn

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// OutcomeQuota is the outcome of a turn refused because its folder used up
// its turn budget. Such a turn is failed for good: a retry cannot help.
const OutcomeQuota = "quota-exhausted"

// BudgetWindow is the sliding window a turn budget counts over.
const BudgetWindow = service.BudgetWindow

// ErrQuota marks a folder whose turn budget is used up.
var ErrQuota = errors.New("turn budget used up")

// Budget is a folder's effective turns-per-day cap (service.EffectiveBudget);
// 0 means unlimited.
func (q *Queue) Budget(ctx context.Context, folder string) (int, error) {
	n, _, err := service.EffectiveBudget(ctx, q.o.Store, folder, q.o.MaxTurnsPerDay)
	return n, err
}

// checkBudget returns an error wrapping ErrQuota when t's folder already
// started its budget of turns within the last BudgetWindow.
func (q *Queue) checkBudget(ctx context.Context, t store.Turn) (limit int, err error) {
	limit, err = q.Budget(ctx, t.Folder)
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil // the folder is gone: the attempt fails it for good
	}
	if err != nil || limit == 0 {
		return limit, err
	}
	used, err := q.o.Store.TurnsStartedSince(ctx, t.Folder, time.Now().Add(-BudgetWindow).UnixMilli(), t.ID)
	if err != nil {
		return limit, err
	}
	if used >= limit {
		return limit, fmt.Errorf("folder %s started %d turns in the last 24h, its budget is %d: %w", t.Folder, used, limit, ErrQuota)
	}
	return limit, nil
}

// refuse ends t as quota-exhausted without starting a guest. Its messages
// stay stored; the chat gets one short notice through the normal outbound
// path, so the user knows why no answer comes.
func (q *Queue) refuse(ctx context.Context, t store.Turn, limit int, why error, log *slog.Logger) {
	// A daemon that died after the notice but before the record must not send it twice.
	sent, err := q.o.Store.TurnOutbound(ctx, t.ID)
	if err != nil {
		log.Error("turn budget notice", "err", err)
	}
	if err == nil && len(sent) == 0 {
		q.notifyQuota(ctx, t, limit, log)
	}
	q.finish(ctx, t.ID, store.TurnEnd{Status: store.TurnFailed, Outcome: OutcomeQuota, Error: why.Error()}, log)
}

func (q *Queue) notifyQuota(ctx context.Context, t store.Turn, limit int, log *slog.Logger) {
	q.notify(ctx, t, fmt.Sprintf("arizuko: this folder's turn budget is used up (%d per day); try later", limit), log)
}

// notify tells the chat of the turn's newest message what happened to it:
// the host's one notice when the agent cannot answer.
func (q *Queue) notify(ctx context.Context, t store.Turn, text string, log *slog.Logger) {
	msgs, err := q.o.Store.TurnMessages(ctx, t)
	if err != nil || len(msgs) == 0 {
		log.Error("turn notice: no chat to tell", "err", err)
		return
	}
	last := msgs[len(msgs)-1]
	if _, err := q.o.Store.PutOutbound(ctx, store.Outbound{ChatJID: last.ChatJID, Folder: t.Folder, Topic: t.Topic,
		Text: text, ReplyTo: last.PlatformID, TurnID: t.ID}); err != nil {
		log.Error("turn notice", "err", err)
		return
	}
	if q.o.OnOutbound != nil {
		q.o.OnOutbound()
	}
}
