package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/router"
)

// newRouteCmd is `arizuko route`.
func newRouteCmd(a *app) *cobra.Command {
	var r router.Route
	radd := &cobra.Command{
		Use:   "add --seq N --match 'key=glob ...' --target folder[#topic]",
		Short: "Add a route; the lowest seq whose match holds wins",
		Long: `Add a route; the lowest seq whose match holds wins (ties: the older route).

Needs route:add on the target folder. A caller who holds route:add on part of
the tree only (a tenant's admin, not an operator) adds a route for one chat:
the match must carry a literal chat_jid=<jid> term (no * or ?), seq must be
100 or more so the operator's routes keep precedence, and the chat must be one
no route could send to another tenant (top-level folder) than the target's,
for any sender or a room not yet seen. A chat jid never holds a space, a
control character or '='.`,
		Args: cobra.NoArgs,
		RunE: a.run(func(ctx context.Context, s service.Service, _ []string) error {
			out, err := s.AddRoute(ctx, r)
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Println(out.ID)
			return nil
		}),
	}
	radd.Flags().IntVar(&r.Seq, "seq", 100, "order: lower seq is tried first")
	radd.Flags().StringVar(&r.Match, "match", "", "space-separated key=glob terms over platform, room, chat_jid, sender, verb (empty: all)")
	radd.Flags().StringVar(&r.Target, "target", "", "folder[#topic]; #observe stores without a turn; {sender} expands to one folder per sender (readable part, then a hash)")
	radd.MarkFlagRequired("target")
	rls := &cobra.Command{
		Use: "ls", Short: "List routes in resolution order", Args: cobra.NoArgs,
		RunE: listing(a, "ID\tSEQ\tMATCH\tTARGET",
			func(ctx context.Context, s service.Service, _ []string) ([]router.Route, error) {
				return s.ListRoutes(ctx)
			},
			func(r router.Route) string {
				return fmt.Sprintf("%d\t%d\t%s\t%s", r.ID, r.Seq, r.Match, r.Target)
			}),
	}
	rrm := &cobra.Command{
		Use: "rm ID", Short: "Remove a route", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return s.RemoveRoute(ctx, id)
		}),
	}
	return group("route", "Manage routes", radd, rls, rrm)
}
