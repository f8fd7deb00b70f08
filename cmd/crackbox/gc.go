package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/netjail"
)

func init() {
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove the taps, nftables tables and address claims of crackbox runs that were killed",
		Long: `Remove the network leftovers of crackbox runs whose process is gone (killed with
SIGKILL, or lost with the machine): their tap devices, nftables tables and address
claims. Objects of live runs are never touched. Every crackbox run does this first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.OutOrStdout())
		},
	}
	root.AddCommand(cmd)
}

func runGC(w io.Writer) error {
	if err := netjail.Available(); err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	removed, err := netjail.GC(netjail.DefaultRunsDir())
	for _, r := range removed {
		fmt.Fprintln(w, "removed", r)
	}
	if err != nil {
		return fmt.Errorf("gc: %w", err)
	}
	if len(removed) == 0 {
		fmt.Fprintln(w, "nothing to remove")
	}
	return nil
}
