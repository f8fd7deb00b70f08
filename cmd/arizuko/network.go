package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

func (a *app) networkSet(effect string) func(*cobra.Command, []string) error {
	return a.run(func(ctx context.Context, s service.Service, args []string) error {
		for _, h := range args[1:] {
			r, err := s.SetNetworkRule(ctx, store.NetworkRule{Folder: args[0], Host: h, Effect: effect})
			if err != nil {
				return err
			}
			fmt.Printf("%s %s %s\n", r.Folder, r.Effect, r.Host)
		}
		return nil
	})
}

// newNetworkCmd is `arizuko network`.
func newNetworkCmd(a *app) *cobra.Command {
	allowCmd := &cobra.Command{
		Use:   "allow FOLDER HOST...",
		Short: "Let FOLDER and everything below it reach HOST (crackbox allowlist syntax)",
		Args:  cobra.MinimumNArgs(2),
		RunE:  a.networkSet("allow"),
	}
	denyCmd := &cobra.Command{
		Use:   "deny FOLDER HOST...",
		Short: "Remove HOST from the allowlist FOLDER and everything below it inherit",
		Args:  cobra.MinimumNArgs(2),
		RunE:  a.networkSet("deny"),
	}
	rm := &cobra.Command{
		Use: "rm FOLDER HOST...", Short: "Drop FOLDER's own rule (allow or deny) for HOST", Args: cobra.MinimumNArgs(2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			for _, h := range args[1:] {
				if err := s.RemoveNetworkRule(ctx, args[0], h); err != nil {
					return err
				}
			}
			return nil
		}),
	}
	ls := &cobra.Command{
		Use: "ls FOLDER", Short: "Show FOLDER's own and inherited rules and its effective allowlist", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			v, err := s.ListNetwork(ctx, args[0])
			if err != nil || a.json {
				return jsonOr(v, err)
			}
			table("FOLDER\tEFFECT\tHOST", func(w *tabwriter.Writer) {
				for _, r := range v.Rules {
					fmt.Fprintf(w, "%s\t%s\t%s\n", r.Folder, r.Effect, r.Host)
				}
			})
			fmt.Println("\neffective allowlist:")
			for _, h := range v.Effective {
				fmt.Println("  " + h)
			}
			return nil
		}),
	}
	return group("network", "Manage per-folder egress allowlists", allowCmd, denyCmd, rm, ls)
}
