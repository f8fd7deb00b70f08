package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/service"
	"github.com/crackbox/crackbox/pkg/store"
)

func table(header string, rows func(w *tabwriter.Writer)) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	rows(w)
	w.Flush()
}

func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	c.AddCommand(subs...)
	root.AddCommand(c)
	return c
}

func run(fn func(ctx context.Context, s service.Service, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return withService(cmd.Context(), func(ctx context.Context, s service.Service) error { return fn(ctx, s, args) })
	}
}

func init() {
	var f store.Folder
	var agent string
	add := &cobra.Command{
		Use:   "add PATH",
		Short: "Add a folder (its parent must exist)",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			f.Path = args[0]
			if agent != "" {
				f.AgentCommand = strings.Fields(agent)
			}
			out, err := s.AddFolder(ctx, f)
			if err != nil {
				return err
			}
			if flagJSON {
				return printJSON(out)
			}
			fmt.Println(out.Path)
			return nil
		}),
	}
	add.Flags().StringVar(&f.DisplayName, "name", "", "display name")
	add.Flags().StringVar(&agent, "agent", "", "agent command run in the guest for a turn (split on spaces)")
	add.Flags().IntVar(&f.GuestMemoryMiB, "memory", 0, "guest memory in MiB (0: instance default)")
	add.Flags().IntVar(&f.GuestCPUs, "cpus", 0, "guest vCPUs (0: instance default)")

	ls := &cobra.Command{
		Use: "ls", Short: "List folders", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, s service.Service, _ []string) error {
			out, err := s.ListFolders(ctx)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			table("PATH\tNAME\tAGENT\tMEMORY\tCPUS", func(w *tabwriter.Writer) {
				for _, f := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%d\n", f.Path, f.DisplayName, strings.Join(f.AgentCommand, " "), f.GuestMemoryMiB, f.GuestCPUs)
				}
			})
			return nil
		}),
	}
	rm := &cobra.Command{
		Use: "rm PATH", Short: "Remove a folder without children (its directory stays on disk)", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveFolder(ctx, args[0])
		}),
	}
	group("folder", "Manage folders (tenants)", add, ls, rm, newBudgetCmd())

	var r router.Route
	radd := &cobra.Command{
		Use:   "add --seq N --match 'key=glob ...' --target folder[#topic]",
		Short: "Add a route; the lowest seq whose match holds wins",
		Args:  cobra.NoArgs,
		RunE: run(func(ctx context.Context, s service.Service, _ []string) error {
			out, err := s.AddRoute(ctx, r)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			fmt.Println(out.ID)
			return nil
		}),
	}
	radd.Flags().IntVar(&r.Seq, "seq", 100, "order: lower seq is tried first")
	radd.Flags().StringVar(&r.Match, "match", "", "space-separated key=glob terms over platform, room, chat_jid, sender, verb (empty: all)")
	radd.Flags().StringVar(&r.Target, "target", "", "folder[#topic]; #observe stores without a turn; {sender} expands to the sender")
	radd.MarkFlagRequired("target")
	rls := &cobra.Command{
		Use: "ls", Short: "List routes in resolution order", Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, s service.Service, _ []string) error {
			out, err := s.ListRoutes(ctx)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			table("ID\tSEQ\tMATCH\tTARGET", func(w *tabwriter.Writer) {
				for _, r := range out {
					fmt.Fprintf(w, "%d\t%d\t%s\t%s\n", r.ID, r.Seq, r.Match, r.Target)
				}
			})
			return nil
		}),
	}
	rrm := &cobra.Command{
		Use: "rm ID", Short: "Remove a route", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return s.RemoveRoute(ctx, id)
		}),
	}
	group("route", "Manage routes", radd, rls, rrm)
}

func jsonOr(v any, err error) error {
	if err != nil {
		return err
	}
	return printJSON(v)
}

func parseID(s string) (int64, error) {
	var id int64
	if _, err := fmt.Sscanf(s, "%d", &id); err != nil || id <= 0 || fmt.Sprint(id) != s {
		return 0, fmt.Errorf("id %q: want a positive integer: %w", s, service.ErrInvalid)
	}
	return id, nil
}
