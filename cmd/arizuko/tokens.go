package main

import (
	"context"
	"fmt"
	"os"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/service"
)

// newTokenCmd is `arizuko token`.
func newTokenCmd(a *app) *cobra.Command {
	var kind, platform string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create an API token (printed once; only its hash is stored)",
		Long: `Create an API token for the HTTP API and the web chat. --kind says what it
may do:
  admin    everything the data dir's own token may do (acts as an operator)
  read     read every list and the outbound queues, change nothing (dashboards)
  adapter  post inbound messages for --platform into chats named
           "<platform>:…" and read that platform's outbound queue, nothing else
The token is printed once on stdout; only its SHA-256 is stored. Revoke it
with "arizuko token rm NAME".`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			out, err := s.AddToken(ctx, service.TokenIn{Name: args[0], Kind: kind, Platform: platform})
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Fprintf(os.Stderr, "token %q (%s) created; it is shown only now:\n", out.Name, out.Kind)
			fmt.Println(out.Secret)
			return nil
		}),
	}
	add.Flags().StringVar(&kind, "kind", service.KindRead, "admin, read or adapter")
	add.Flags().StringVar(&platform, "platform", "", "the adapter token's platform (e.g. slack)")
	ls := &cobra.Command{
		Use: "ls", Short: "List API tokens (names and kinds; never the tokens)", Args: cobra.NoArgs,
		RunE: a.run(func(ctx context.Context, s service.Service, _ []string) error {
			out, err := s.ListTokens(ctx)
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			table("NAME\tKIND\tPLATFORM\tCREATED\tBY", func(w *tabwriter.Writer) {
				for _, t := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", t.Name, t.Kind, t.Platform, time.UnixMilli(t.CreatedAt).UTC().Format(time.RFC3339), t.CreatedBy)
				}
			})
			return nil
		}),
	}
	rm := &cobra.Command{
		Use: "rm NAME", Short: "Revoke an API token at once", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveToken(ctx, args[0])
		}),
	}
	return group("token", "Manage scoped API tokens", add, ls, rm)
}
