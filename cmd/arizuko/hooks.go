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

// newHookCmd is `arizuko hook`.
func newHookCmd(a *app) *cobra.Command {
	var signed bool
	var perMinute int
	add := &cobra.Command{
		Use:   "add FOLDER",
		Short: "Create a webhook: a POST to its URL becomes a message in FOLDER's chat",
		Long: `Create a webhook into FOLDER. A POST to the printed path on the daemon's URL
(JSON, a form or plain text, at most 64 KiB) becomes a message in FOLDER's
chat with the body as its text, and starts a turn. The token in the path is
the credential: it is printed once and only its SHA-256 is stored.
--secret makes a signed hook: every POST needs X-Hub-Signature-256:
sha256=<hex HMAC-SHA256 of the body under the secret> (as GitHub sends it),
and a signed body is accepted once, so a captured delivery cannot be
replayed. An unsigned hook accepts each X-GitHub-Delivery/X-Hook-Delivery id
once. Each hook takes --per-minute deliveries a minute, then answers 429.
The hook posts as whoever created it: revoking that token or grant stops it.
Revoke the hook itself with "arizuko hook rm ID".`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			out, err := s.AddHook(ctx, service.HookIn{Folder: args[0], Signed: signed, PerMinute: perMinute})
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			fmt.Fprintf(os.Stderr, "hook %d into %s created; its path is shown only now:\n", out.ID, out.Folder)
			fmt.Println(out.Path)
			if out.Secret != "" {
				fmt.Fprintln(os.Stderr, "its signing secret, shown only now:")
				fmt.Println(out.Secret)
			}
			return nil
		}),
	}
	add.Flags().BoolVar(&signed, "secret", false, "require an X-Hub-Signature-256 HMAC-SHA256 signature under a secret printed once")
	add.Flags().IntVar(&perMinute, "per-minute", service.DefaultHookPerMinute, "deliveries a minute before 429")
	ls := &cobra.Command{
		Use: "ls", Short: "List webhooks (never their tokens)", Args: cobra.NoArgs,
		RunE: listing(a, "ID\tFOLDER\tSIGNED\tPER_MINUTE\tCREATED\tBY",
			func(ctx context.Context, s service.Service, _ []string) ([]store.Hook, error) {
				return s.ListHooks(ctx)
			},
			func(h store.Hook) string {
				return fmt.Sprintf("%d\t%s\t%t\t%d\t%s\t%s", h.ID, h.Folder, h.Signed, h.PerMinute, time.UnixMilli(h.CreatedAt).UTC().Format(time.RFC3339), h.Owner)
			}),
	}
	rm := &cobra.Command{
		Use: "rm ID", Short: "Revoke a webhook at once", Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			return s.RemoveHook(ctx, id)
		}),
	}
	return group("hook", "Manage webhooks into folders", add, ls, rm)
}
