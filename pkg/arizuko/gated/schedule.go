package gated

import (
	"context"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

type scheduleIn struct {
	Cron   string `json:"cron"`
	Prompt string `json:"prompt"`
	TZ     string `json:"tz"`
	Folder string `json:"folder"`
}

func (h *handler) registerSchedule(srv *mcp.Server) {
	add(srv, "schedule_task", `Inject a turn with prompt into a folder (default this one) on a cron schedule: "MIN HOUR DOM MON DOW" or @hourly/@daily/"@every 1h", read in tz (IANA, default UTC).`,
		schema("cron:string", "prompt:string", "tz?:string", "folder?:string"),
		func(ctx context.Context, in scheduleIn) (string, error) {
			f, err := h.optFolder(in.Folder)
			if err != nil {
				return "", fmt.Errorf("schedule_task: %w", err)
			}
			// The grant decides where: by default a folder's own ({self}) only.
			if err := h.check(ctx, "schedule_task", f); err != nil {
				return "", err
			}
			sc, err := h.s.o.Control.AddSchedule(h.admin(ctx), service.ScheduleIn{Folder: f, Cron: in.Cron, TZ: in.TZ, Prompt: in.Prompt})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("schedule %d: %s (%s) into %s, next run %s", sc.ID, sc.Cron, sc.TZ, sc.Folder,
				time.UnixMilli(sc.NextRun).UTC().Format(time.RFC3339)), nil
		})
}
