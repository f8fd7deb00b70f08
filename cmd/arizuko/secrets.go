package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// scopeArg accepts "folder:<path>", "user:<id>" or a bare folder path.
func scopeArg(s string) string {
	if strings.HasPrefix(s, "folder:") || strings.HasPrefix(s, "user:") {
		return s
	}
	return "folder:" + s
}

// newSecretCmd is `arizuko secret`.
func newSecretCmd(a *app) *cobra.Command {
	rm := &cobra.Command{
		Use: "rm SCOPE NAME", Short: "Remove a secret", Args: cobra.ExactArgs(2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveSecret(ctx, scopeArg(args[0]), args[1])
		}),
	}
	ls := &cobra.Command{
		Use: "ls [SCOPE]", Short: "List secret names (never values)", Args: cobra.MaximumNArgs(1),
		RunE: listing(a, "SCOPE\tNAME\tUPDATED",
			func(ctx context.Context, s service.Service, args []string) ([]store.SecretName, error) {
				scope := ""
				if len(args) == 1 {
					scope = scopeArg(args[0])
				}
				return s.ListSecrets(ctx, scope)
			},
			func(n store.SecretName) string {
				return fmt.Sprintf("%s:%s\t%s\t%s", n.ScopeKind, n.ScopeID, n.Name, time.UnixMilli(n.UpdatedAt).UTC().Format(time.RFC3339))
			}),
	}
	rotate := &cobra.Command{
		Use:   "rotate",
		Short: "Re-seal every secret under the primary (first) key of the ring",
		Long: `Re-seal every secret under the primary key. Put the new key first and the
old one after it ($ARIZUKO_SECRETS_KEY="new,old" or one per line in the key
file), run rotate, then drop the old key.`,
		Args: cobra.NoArgs,
		RunE: a.run(func(ctx context.Context, s service.Service, _ []string) error {
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
	return group("secret", "Manage secrets (write-only)", newSecretSetCmd(a), rm, ls, rotate, keygen)
}

// newSecretSetCmd is `arizuko secret set`.
func newSecretSetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "set SCOPE NAME",
		Short: "Store a secret (write-only), typed at a prompt without echo or piped on stdin",
		Long: `Store a secret for SCOPE (a folder path, folder:<path> or user:<id>).
The value is typed at a prompt that does not echo, or read from stdin when it
is a pipe or file; never from the command line, where ps and shell history
would show it. Folder secrets are inherited by every folder below. Values are
sealed with AES-256-GCM and never come back out through any API.`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 3 {
				return errors.New("secret values are not taken from the command line (ps and shell history show them); type it at the prompt or pipe it: printf %s \"$V\" | arizuko secret set SCOPE NAME")
			}
			return cobra.ExactArgs(2)(nil, args)
		},
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			v, err := readSecret(args[1])
			if err != nil {
				return err
			}
			return s.SetSecret(ctx, service.SecretIn{Scope: scopeArg(args[0]), Name: args[1], Value: v})
		}),
	}
}

// readSecret reads a value from the terminal without echo, or from stdin
// when it is not a terminal; one trailing newline is dropped. An empty value
// is refused here, before anything is stored.
func readSecret(name string) (string, error) {
	var v string
	if fd := int(os.Stdin.Fd()); term.IsTerminal(fd) {
		fmt.Fprintf(os.Stderr, "value for %s (not shown): ", name)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(os.Stderr)
		if err != nil {
			return "", fmt.Errorf("read %s from the terminal: %w", name, err)
		}
		v = string(b)
	} else {
		b, err := io.ReadAll(io.LimitReader(os.Stdin, service.MaxSecret+1))
		if err != nil {
			return "", err
		}
		v = strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r")
	}
	if v == "" {
		return "", fmt.Errorf("secret %s: the value is empty; type it at the prompt or pipe it on stdin", name)
	}
	return v, nil
}
