package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// newTokenCmd is `arizuko token`.
func newTokenCmd(a *app) *cobra.Command {
	var kind, platform, tenant string
	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Create an API token (printed once; only its hash is stored)",
		Long: `Create an API token for the HTTP API and the web chat. --kind says what it
may do:
  admin    everything the data dir's own token may do (acts as an operator)
  read     read every list and the outbound queues, change nothing (dashboards)
  adapter  post inbound messages for --platform into chats named
           "<platform>:…" and read that platform's outbound queue, nothing else
  tenant   (--tenant acme) an operator of one tenant: folders, its own routes,
           grants it may hand on, secrets, turns, messages, observations and
           the web chat on acme and below; no tokens, adapters, platform-wide
           routes or other tenants' rows
The token is printed once on stdout; only its SHA-256 is stored. Revoke it
with "arizuko token rm NAME".`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			if tenant != "" && kind == service.KindRead { // the default: --tenant alone
				kind = service.KindTenant
			}
			out, err := s.AddToken(ctx, service.TokenIn{Name: args[0], Kind: kind, Platform: platform, Tenant: tenant})
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Fprintf(os.Stderr, "token %q (%s) created; it is shown only now:\n", out.Name, out.Kind)
			fmt.Println(out.Secret)
			return nil
		}),
	}
	add.Flags().StringVar(&kind, "kind", service.KindRead, "admin, read, adapter, runner or tenant")
	add.Flags().StringVar(&tenant, "tenant", "", "the tenant token's top-level folder (implies --kind tenant)")
	add.Flags().StringVar(&platform, "platform", "", "the adapter token's platform (e.g. slack)")
	ls := &cobra.Command{
		Use: "ls", Short: "List API tokens (names and kinds; never the tokens)", Args: cobra.NoArgs,
		RunE: listing(a, "NAME\tKIND\tPLATFORM\tTENANT\tCREATED\tBY",
			func(ctx context.Context, s service.Service, _ []string) ([]store.Token, error) {
				return s.ListTokens(ctx)
			},
			func(t store.Token) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", t.Name, t.Kind, t.Platform, t.Tenant, time.UnixMilli(t.CreatedAt).UTC().Format(time.RFC3339), t.CreatedBy)
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
