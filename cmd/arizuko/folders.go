package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// newFolderCmd is `arizuko folder`.
func newFolderCmd(a *app) *cobra.Command {
	var f store.Folder
	var agent string
	add := &cobra.Command{
		Use:   "add PATH",
		Short: "Add a folder (its parent must exist)",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			f.Path = args[0]
			if agent != "" {
				f.AgentCommand = strings.Fields(agent)
			}
			out, err := s.AddFolder(ctx, f)
			if err != nil {
				return err
			}
			if a.json {
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
	add.Flags().StringArrayVar(&f.AgentEnv, "env", nil, "KEY=VALUE in the agent's environment, repeatable; not secret, the guest sees it")
	add.Flags().BoolVar(&f.StdoutReply, "stdout-reply", false, "deliver the agent's stdout as the reply when it calls no reply tool")

	ls := &cobra.Command{
		Use: "ls", Short: "List folders", Args: cobra.NoArgs,
		RunE: listing(a, "PATH\tNAME\tAGENT\tMEMORY\tCPUS",
			func(ctx context.Context, s service.Service, _ []string) ([]store.Folder, error) {
				return s.ListFolders(ctx)
			},
			func(f store.Folder) string {
				return fmt.Sprintf("%s\t%s\t%s\t%d\t%d", f.Path, f.DisplayName, strings.Join(f.AgentCommand, " "), f.GuestMemoryMiB, f.GuestCPUs)
			}),
	}
	rm := &cobra.Command{
		Use: "rm PATH", Short: "Remove a folder without children; its home is moved aside",
		Long: `Remove a folder that has no children, with its grants, the grants others
hold on it alone (a scope of the folder or below it), secrets, network rules
and sessions, and the routes and engagements that send chats to it or
below it. Its home is kept, moved to <data>/homes/#removed/<name>-<unix nanos>
where no folder's guest gets it, so a folder later added under the same name
starts with an empty home and no chats. Its messages and finished turns are
kept under the name #removed/<unix nanos>/<path>, which no folder can have, so
none becomes the new folder's work or history; a turn still open fails and
tells its chat. Homes on runner hosts stay where they are: remove them there.`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveFolder(ctx, args[0])
		}),
	}
	return group("folder", "Manage folders (tenants)", add, ls, rm, newFolderSetCmd(a), newFolderHomeCmd(a), newBudgetCmd(a))
}
