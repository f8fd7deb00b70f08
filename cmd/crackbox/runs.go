package main

import (
	"encoding/json"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/jail/runrec"
)

// newRunsCmd builds crackbox runs with ls and show.
func newRunsCmd() *cobra.Command {
	runs := &cobra.Command{
		Use:   "runs",
		Short: "List and show the records of past crackbox runs",
		Long: `Each crackbox run leaves a record: what ran, with which allowlist and network
mode, how it ended and how long it took, and the proxy's decision log. The newest
records are kept. They live in $CRACKBOX_RUNS_DIR, else /var/lib/crackbox/runs for
root and ~/.local/state/crackbox/runs for others.`,
	}
	ls := &cobra.Command{
		Use:   "ls",
		Short: "List run records, newest first",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ms, err := runStore().List()
			if err != nil {
				return err
			}
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				if ms == nil {
					ms = []runrec.Manifest{}
				}
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				return enc.Encode(ms)
			}
			return runrec.WriteList(cmd.OutOrStdout(), ms)
		},
	}
	ls.Flags().Bool("json", false, "print the records as a JSON array, newest first")
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one run record (an id prefix is enough)",
		Args:  cobra.ExactArgs(1),
		ValidArgsFunction: func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
			return runIDs(), cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := runStore().Get(args[0])
			if err != nil {
				return err
			}
			return runrec.WriteShow(cmd.OutOrStdout(), m)
		},
	}
	runs.AddCommand(ls, show)
	return runs
}

// runIDs completes run ids: every record's id with its command as the description.
func runIDs() []string {
	ms, _ := runStore().List()
	out := make([]string, 0, len(ms))
	for _, m := range ms {
		out = append(out, m.ID+"\t"+strings.Join(strings.Fields(strings.Join(m.Argv, " ")), " "))
	}
	return out
}
