package main

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/api"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// daemonCall does one JSON request against the daemon through the API client.
func daemonCall(ctx context.Context, base, token, method, path string, body, out any) error {
	return api.NewClient(base, token).Do(ctx, method, path, body, out)
}

func when(ms int64) string {
	if ms == 0 {
		return "-"
	}
	return time.UnixMilli(ms).Local().Format("2006-01-02 15:04:05")
}

func took(t store.Turn) string {
	if t.StartedAt == 0 || t.EndedAt < t.StartedAt {
		return "-"
	}
	return time.Duration((t.EndedAt - t.StartedAt) * int64(time.Millisecond)).Round(100 * time.Millisecond).String()
}

func exitText(t store.Turn) string {
	if t.ExitCode == nil {
		return "-"
	}
	return fmt.Sprint(*t.ExitCode)
}

func clip(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

// newTurnsCmd is `arizuko turns`.
func newTurnsCmd(a *app) *cobra.Command {
	turns := &cobra.Command{Use: "turns", Short: "Show agent turns: when they ran, how they ended, what they sent"}
	turns.AddCommand(newTurnsLsCmd(a), newTurnsShowCmd(a))
	return turns
}

// newTurnsLsCmd is `arizuko turns ls`.
func newTurnsLsCmd(a *app) *cobra.Command {
	var folder string
	var limit int
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List the newest turns",
		Args:  cobra.NoArgs,
		RunE: a.run(func(ctx context.Context, s service.Service, _ []string) error {
			ts, err := s.ListTurns(ctx, folder, limit)
			if err != nil || a.json {
				return jsonOr(ts, err)
			}
			table("ID\tFOLDER\tTOPIC\tSTATUS\tTRIES\tEXIT\tSTARTED\tTOOK\tOUTCOME", func(w *tabwriter.Writer) {
				for _, t := range ts {
					out := t.Outcome
					if t.Error != "" {
						out = firstNonEmpty(out+" ", "") + "error: " + t.Error
					}
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", t.ID, t.Folder, firstNonEmpty(t.Topic, "-"), t.Status,
						t.Attempts, exitText(t), when(t.StartedAt), took(t), clip(out, 60))
				}
			})
			return nil
		}),
	}
	ls.Flags().StringVar(&folder, "folder", "", "only this folder's turns")
	ls.Flags().IntVar(&limit, "limit", 20, "how many turns")
	return ls
}

// newTurnsShowCmd is `arizuko turns show`.
func newTurnsShowCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one turn: its messages, replies, exit code, egress summary and the agent's output",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			var id int64
			if _, err := fmt.Sscan(args[0], &id); err != nil || id <= 0 {
				return fmt.Errorf("turn id %q: want a positive number: %w", args[0], service.ErrInvalid)
			}
			d, err := s.GetTurn(ctx, id)
			if err != nil || a.json {
				return jsonOr(d, err)
			}
			where := d.Folder
			if d.Topic != "" {
				where += "#" + d.Topic
			}
			fmt.Printf("turn %d  %s  %s after %d attempt(s)\n", d.ID, where, d.Status, d.Attempts)
			fmt.Printf("session   %s\nstarted   %s\nended     %s (%s)\nexit      %s\ndepth     %d\n",
				firstNonEmpty(d.SessionID, "-"), when(d.StartedAt), when(d.EndedAt), took(d.Turn), exitText(d.Turn), d.Depth)
			fmt.Printf("outcome   %s\n", firstNonEmpty(d.Outcome, "-"))
			if d.Error != "" {
				fmt.Printf("error     %s\n", d.Error)
			}
			fmt.Printf("egress    %s\n", firstNonEmpty(d.Egress, "nothing blocked"))
			fmt.Println("\nmessages in:")
			for _, m := range d.Messages {
				fmt.Printf("  #%d %s %s: %s\n", m.ID, m.ChatJID, firstNonEmpty(m.Sender, "?"), clip(m.Text, 200))
			}
			fmt.Println("sent:")
			for _, o := range d.Outbound {
				fmt.Printf("  #%d -> %s [%s, %d attempt(s)]: %s\n", o.ID, o.ChatJID, o.Status, o.Attempts, clip(o.Text, 200))
			}
			for _, o := range d.Outputs {
				exit := "-"
				if o.ExitCode != nil {
					exit = fmt.Sprint(*o.ExitCode)
				}
				fmt.Printf("\noutput of attempt %d (exit %s, the last %d KiB at most):\n", o.Attempt, exit, store.MaxTurnOutput>>10)
				if o.Output == "" {
					fmt.Println("  (none)")
				}
				for _, l := range strings.Split(strings.TrimRight(o.Output, "\n"), "\n") {
					if o.Output != "" {
						fmt.Printf("  | %s\n", l)
					}
				}
			}
			return nil
		}),
	}
}
