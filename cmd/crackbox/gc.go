package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/netjail"
	"github.com/crackbox/crackbox/pkg/jail/rundir"
)

// newGCCmd builds crackbox gc.
func newGCCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "Remove the run dirs, cgroups, taps, nftables tables, address and vmm uid claims of crackbox runs that were killed",
		Long: `Remove the leftovers of crackbox runs whose process is gone (killed with SIGKILL,
or lost with the machine): their run directories and cgroup leaves, their tap devices,
nftables tables and address claims, and the claims on QEMU's per-run uids (killing any
process still running as one). Objects of live runs are never touched. Every crackbox
run does the network part first.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runGC(cmd.OutOrStdout())
		},
	}
	return cmd
}

func runGC(w io.Writer) error {
	removed, uidErr := jail.GC(rundir.DefaultBase())
	if err := netjail.Available(); err != nil {
		for _, r := range removed {
			fmt.Fprintln(w, "removed", r)
		}
		return fmt.Errorf("gc: %w", errors.Join(uidErr, err))
	}
	nr, err := netjail.GC(netjail.DefaultRunsDir())
	removed = append(removed, nr...)
	err = errors.Join(uidErr, err)
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
