package main

import (
	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/runrec"
)

func init() {
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
			return runrec.WriteList(cmd.OutOrStdout(), ms)
		},
	}
	show := &cobra.Command{
		Use:   "show ID",
		Short: "Show one run record (an id prefix is enough)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			m, err := runStore().Get(args[0])
			if err != nil {
				return err
			}
			return runrec.WriteShow(cmd.OutOrStdout(), m)
		},
	}
	runs.AddCommand(ls, show)
	root.AddCommand(runs)
}
