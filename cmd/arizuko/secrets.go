package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/secrets"
	"github.com/crackbox/crackbox/pkg/service"
)

// scopeArg accepts "folder:<path>", "user:<id>" or a bare folder path.
func scopeArg(s string) string {
	if strings.HasPrefix(s, "folder:") || strings.HasPrefix(s, "user:") {
		return s
	}
	return "folder:" + s
}

func init() {
	set := &cobra.Command{
		Use:   "set SCOPE NAME [VALUE]",
		Short: "Store a secret (write-only); without VALUE it is read from stdin",
		Long: `Store a secret for SCOPE (a folder path, folder:<path> or user:<id>).
Folder secrets are inherited by every folder below. Values are sealed with
AES-256-GCM and never come back out through any API.`,
		Args: cobra.RangeArgs(2, 3),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			var v string
			if len(args) == 3 {
				v = args[2]
			} else {
				b, err := io.ReadAll(io.LimitReader(os.Stdin, service.MaxSecret+1))
				if err != nil {
					return err
				}
				v = strings.TrimSuffix(string(b), "\n")
			}
			return s.SetSecret(ctx, service.SecretIn{Scope: scopeArg(args[0]), Name: args[1], Value: v})
		}),
	}
	rm := &cobra.Command{
		Use: "rm SCOPE NAME", Short: "Remove a secret", Args: cobra.ExactArgs(2),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveSecret(ctx, scopeArg(args[0]), args[1])
		}),
	}
	ls := &cobra.Command{
		Use: "ls [SCOPE]", Short: "List secret names (never values)", Args: cobra.MaximumNArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			scope := ""
			if len(args) == 1 {
				scope = scopeArg(args[0])
			}
			out, err := s.ListSecrets(ctx, scope)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			table("SCOPE\tNAME\tUPDATED", func(w *tabwriter.Writer) {
				for _, n := range out {
					fmt.Fprintf(w, "%s:%s\t%s\t%s\n", n.ScopeKind, n.ScopeID, n.Name, time.UnixMilli(n.UpdatedAt).UTC().Format(time.RFC3339))
				}
			})
			return nil
		}),
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-seal every secret under the primary (first) key of the ring",
		Long: `Re-seal every secret under the primary key. Put the new key first and the
old one after it ($ARIZUKO_SECRETS_KEY="new,old" or one per line in the key
file), run rotate, then drop the old key.`,
		Args: cobra.NoArgs,
		RunE: run(func(ctx context.Context, s service.Service, _ []string) error {
			n, err := s.RotateSecrets(ctx)
			if err != nil {
				return err
			}
			fmt.Printf("resealed %d secrets\n", n)
			return nil
		}),
	}
	keygen := &cobra.Command{
		Use: "keygen", Short: "Print a new random secrets key", Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			fmt.Println(secrets.GenerateKey())
			return nil
		},
	}
	group("secret", "Manage secrets (write-only)", set, rm, ls, rotate, keygen)
}
