package service

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/schedule"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// MaxPrompt bounds a scheduled turn's prompt.
const MaxPrompt = 16 << 10

// ScheduleIn asks for a turn injected into Folder on a cron schedule.
type ScheduleIn struct {
	Folder string `json:"folder"`
	Cron   string `json:"cron"`
	TZ     string `json:"tz,omitempty"` // IANA zone; "" is UTC
	Prompt string `json:"prompt"`
}

// SchedulePrincipal names a schedule as a message's sender.
func SchedulePrincipal(id int64) string { return fmt.Sprintf("schedule:%d", id) }

// ScheduleFireAction is what a schedule's owner must still hold on its
// folder when it fires: a folder's own schedules came through its MCP tool.
func ScheduleFireAction(owner string) string {
	if strings.HasPrefix(owner, "folder:") {
		return "mcp:schedule_task"
	}
	return "message:post"
}

// AddSchedule stores a schedule; needs schedule:add on its folder.
func (l *Local) AddSchedule(ctx context.Context, in ScheduleIn) (store.Schedule, error) {
	if err := folder.Validate(in.Folder); err != nil {
		return store.Schedule{}, fmt.Errorf("folder %q: %w: %w", in.Folder, err, ErrInvalid)
	}
	if in.TZ == "" {
		in.TZ = "UTC"
	}
	spec, err := schedule.Parse(in.Cron, in.TZ)
	if err != nil {
		return store.Schedule{}, fmt.Errorf("%w: %w", err, ErrInvalid)
	}
	switch {
	case strings.TrimSpace(in.Prompt) == "":
		return store.Schedule{}, invalid("prompt is empty: say what the scheduled turn should do")
	case len(in.Prompt) > MaxPrompt:
		return store.Schedule{}, invalid("prompt is %d bytes, the limit is %d", len(in.Prompt), MaxPrompt)
	case !utf8.ValidString(in.Prompt):
		return store.Schedule{}, invalid("prompt is not UTF-8")
	}
	if err := l.check(ctx, "schedule:add", in.Folder); err != nil {
		return store.Schedule{}, err
	}
	if err := l.limitSchedules(ctx, in.Folder); err != nil {
		return store.Schedule{}, err
	}
	sc, err := l.st.InsertSchedule(ctx, store.Schedule{Folder: in.Folder, Cron: in.Cron, TZ: in.TZ, Prompt: in.Prompt,
		NextRun: spec.Next(time.Now()).UnixMilli(), Owner: Actor(ctx)})
	if errors.Is(err, store.ErrNotFound) {
		return sc, fmt.Errorf("%w (add the folder first)", err)
	}
	return sc, err
}

// ListSchedules lists the schedules of the folders the caller may schedule:read.
func (l *Local) ListSchedules(ctx context.Context) ([]store.Schedule, error) {
	show, err := l.visible(ctx, "schedule:read")
	if err != nil {
		return nil, err
	}
	ss, err := l.st.ListSchedules(ctx)
	return filter(ss, show, func(s store.Schedule) string { return s.Folder }), err
}

// RemoveSchedule deletes a schedule; needs schedule:rm on its folder.
func (l *Local) RemoveSchedule(ctx context.Context, id int64) error {
	sc, err := l.st.GetSchedule(ctx, id)
	if err != nil {
		return err
	}
	if err := l.check(ctx, "schedule:rm", sc.Folder); err != nil {
		return err
	}
	return l.st.DeleteSchedule(ctx, id)
}
