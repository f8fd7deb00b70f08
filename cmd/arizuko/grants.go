package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// newGrantCmd is `arizuko grant`.
func newGrantCmd(a *app) *cobra.Command {
	var principal string
	ls := &cobra.Command{
		Use: "ls", Short: "List grant rows", Args: cobra.NoArgs,
		RunE: listing(a, "ID\tPRINCIPAL\tEFFECT\tACTION\tSCOPE\tOPTION\tBY\tPARAMS",
			func(ctx context.Context, s service.Service, _ []string) ([]acl.Grant, error) {
				return s.ListGrants(ctx, principal)
			},
			func(g acl.Grant) string {
				return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%v\t%s\t%s", g.ID, g.Principal, g.Effect, g.Action, g.Scope, g.GrantOption, g.GrantedBy, g.Params)
			}),
	}
	ls.Flags().StringVar(&principal, "principal", "", "only this principal's rows")
	rm := &cobra.Command{
		Use: "rm ID", Short: "Remove a grant row", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return s.RemoveGrant(ctx, id)
		}),
	}
	member := &cobra.Command{
		Use: "member MEMBER ROLE", Short: "Make MEMBER hold every row of ROLE", Args: cobra.ExactArgs(2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.AddMember(ctx, acl.Edge{Member: args[0], Role: args[1]})
		}),
	}
	unmember := &cobra.Command{
		Use: "unmember MEMBER ROLE", Short: "Remove a membership edge", Args: cobra.ExactArgs(2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveMember(ctx, acl.Edge{Member: args[0], Role: args[1]})
		}),
	}
	members := &cobra.Command{
		Use: "members", Short: "List membership edges", Args: cobra.NoArgs,
		RunE: listing(a, "MEMBER\tROLE",
			func(ctx context.Context, s service.Service, _ []string) ([]acl.Edge, error) {
				return s.ListMembers(ctx)
			},
			func(e acl.Edge) string {
				return fmt.Sprintf("%s\t%s", e.Member, e.Role)
			}),
	}
	return group("grant", "Manage grants and role membership", newGrantAddCmd(a), ls, rm, member, unmember, members)

}

// newAuditCmd is `arizuko audit`.
func newAuditCmd(a *app) *cobra.Command {
	var limit int
	audit := &cobra.Command{
		Use: "audit", Short: "Show recent denied decisions", Args: cobra.NoArgs,
		RunE: listing(a, "TIME\tDECISION\tPRINCIPAL\tACTION\tSCOPE\tREASON",
			func(ctx context.Context, s service.Service, _ []string) ([]store.AuditEntry, error) {
				return s.ListAudit(ctx, limit)
			},
			func(e store.AuditEntry) string {
				return fmt.Sprintf("%s\t%s\t%s\t%s\t%s\t%s", time.UnixMilli(e.At).UTC().Format(time.RFC3339), e.Decision, e.Principal, e.Action, e.Scope, e.Reason)
			}),
	}
	audit.Flags().IntVar(&limit, "limit", 50, "entries to show")
	return audit
}

// newGrantAddCmd is `arizuko grant add`.
func newGrantAddCmd(a *app) *cobra.Command {
	var deny, option bool
	var params string
	add := &cobra.Command{
		Use:   "add PRINCIPAL ACTION SCOPE",
		Short: "Grant ACTION on SCOPE to PRINCIPAL (folder:<path>, role:<name>, user:<id>)",
		Long: `Grant ACTION on SCOPE to PRINCIPAL. ACTION is exact, "ns:*" or "*"; SCOPE
globs whole segments: "*" one, "**" zero or more ("corp/eng/**" covers corp/eng
and below). A deny row always wins. You may only grant a subset of what you
hold with grant option. A folder principal must exist.

Actions arizuko checks (anything else is refused):
  ` + wrapActions(acl.Actions) + `
  inject:<KEY>@<host>  give the agent a placeholder for the folder secret KEY;
                 the turn's proxy puts the value into HTTPS requests to host
                 (headers, Basic credentials, URL query; never bodies) and
                 nowhere else. One host a row; a missing secret fails the turn.
  shell:env:<KEY>  pass the folder secret KEY itself into the agent's
                 environment: weaker, the agent can send it anywhere its
                 allowlist reaches; use it only for a value the guest must
                 hold. An inject grant on the same KEY wins.

A row of mcp:send with --params '{"chat_jid":"<jid>"}' lets the folder send to
that one chat although it routes to another folder.`,
		Args: cobra.ExactArgs(3),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			g := acl.Grant{Principal: args[0], Action: args[1], Scope: args[2], Effect: acl.Allow, Params: params, GrantOption: option}
			if deny {
				g.Effect = acl.Deny
			}
			out, err := s.AddGrant(ctx, g)
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Println(out.ID)
			return nil
		}),
	}
	add.Flags().BoolVar(&deny, "deny", false, "add a deny row")
	add.Flags().BoolVar(&option, "grant-option", false, "let the principal grant subsets of this row")
	add.Flags().StringVar(&params, "params", "", `parameters (JSON) the row carries, e.g. '{"chat_jid":"slack:C1"}' on mcp:send`)

	return add
}

// wrapActions lists actions a few to a line for --help.
func wrapActions(as []string) string {
	var b strings.Builder
	for i, a := range as {
		switch {
		case i == 0:
		case i%6 == 0:
			b.WriteString("\n  ")
		default:
			b.WriteString(" ")
		}
		b.WriteString(a)
	}
	return b.String()
}
