package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/schedule"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

// fireSchedule posts a schedule's prompt into its folder's chat as its
// owner, if the owner may still; the message starts the turn.
func fireSchedule(ctx context.Context, l *service.Local, post func(context.Context, service.MessageIn) (service.Ingest, error), f schedule.Firing) error {
	sc := f.Schedule
	actx, err := l.ActFor(ctx, sc.Owner, service.ScheduleFireAction(sc.Owner), sc.Folder)
	if err != nil {
		return err
	}
	// The due time names the firing, so a second post of it is a duplicate.
	id := fmt.Sprintf("%s:%d", service.SchedulePrincipal(sc.ID), f.Due.UnixMilli())
	_, err = post(actx, service.MessageIn{ChatJID: router.DirectPrefix + sc.Folder, Sender: service.SchedulePrincipal(sc.ID), Text: sc.Prompt, PlatformID: id})
	return err
}

// newScheduleCmd is `arizuko schedule`.
func newScheduleCmd(a *app) *cobra.Command {
	var tz string
	add := &cobra.Command{
		Use:   "add FOLDER CRON PROMPT",
		Short: "Inject a turn into FOLDER on a cron schedule",
		Long: `Inject a turn with PROMPT into FOLDER's chat on a cron schedule. CRON is
"MIN HOUR DOM MON DOW" (an optional leading seconds field is allowed) or a
descriptor such as @hourly, @daily or "@every 15m", read in --tz (an IANA
zone, default UTC). The runs a downtime missed fire once when the daemon is
back, not one by one. With a fleet (--nats), exactly one control plane fires
each due time. Every firing leaves an audit row (action schedule:fire).`,
		Args: cobra.ExactArgs(3),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			out, err := s.AddSchedule(ctx, service.ScheduleIn{Folder: args[0], Cron: args[1], Prompt: args[2], TZ: tz})
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Printf("schedule %d: %s (%s) into %s, next %s\n", out.ID, out.Cron, out.TZ, out.Folder, time.UnixMilli(out.NextRun).UTC().Format(time.RFC3339))
			return nil
		}),
	}
	add.Flags().StringVar(&tz, "tz", "UTC", "the IANA time zone CRON is read in, e.g. Europe/Prague")
	ls := &cobra.Command{
		Use: "ls", Short: "List scheduled turns", Args: cobra.NoArgs,
		RunE: listing(a, "ID\tFOLDER\tCRON\tTZ\tNEXT\tLAST\tBY\tPROMPT",
			func(ctx context.Context, s service.Service, _ []string) ([]store.Schedule, error) {
				return s.ListSchedules(ctx)
			},
			func(sc store.Schedule) string {
				last := "-"
				if sc.LastRun > 0 {
					last = time.UnixMilli(sc.LastRun).UTC().Format(time.RFC3339)
				}
				return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s", sc.ID, sc.Folder, sc.Cron, sc.TZ,
					time.UnixMilli(sc.NextRun).UTC().Format(time.RFC3339), last, sc.Owner, clip(sc.Prompt, 40))
			}),
	}
	rm := &cobra.Command{
		Use: "rm ID", Short: "Delete a scheduled turn", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return s.RemoveSchedule(ctx, id)
		}),
	}
	return group("schedule", "Manage scheduled turns", add, ls, rm)
}
