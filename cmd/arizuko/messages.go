package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/router"
)

func messageFlags(c *cobra.Command, in *service.MessageIn) {
	c.Flags().StringVar(&in.Sender, "sender", "cli", "sender id")
	c.Flags().StringVar(&in.Platform, "platform", chatPlatform, "platform name")
	c.Flags().StringVar(&in.Room, "room", "", "room")
	c.Flags().StringVar(&in.Verb, "verb", "", "verb (e.g. join)")
}

// newSendCmd is `arizuko send`.
func newSendCmd(a *app) *cobra.Command {
	var in service.MessageIn
	var noWait bool
	send := &cobra.Command{
		Use:   "send CHAT TEXT",
		Short: "Post a message to CHAT and print the reply (web:<folder> addresses a folder directly)",
		Long: `Post one message to CHAT as platform "term" (routes match it with
platform=term). With a daemon running, wait for the reply and print it, like a
one-line arizuko chat; without one, the message is stored for the next start.`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			in.ChatJID, in.Text = args[0], args[1]
			if !noWait && !a.json {
				cfg, err := a.loadConfig()
				if err != nil {
					return err
				}
				base, token, err := cfg.daemonEndpoint()
				if err == nil {
					return sendAndWait(cmd.Context(), base, token, in, os.Stdout)
				}
				if !errors.Is(err, errNoDaemon) {
					return err
				}
			}
			return a.withService(cmd.Context(), func(ctx context.Context, s service.Service) error {
				out, err := s.PostMessage(ctx, in)
				if err != nil || a.json {
					return jsonOr(out, err)
				}
				if !out.Route.Routed() {
					return fmt.Errorf("message %d reached no folder: %s", out.Message.ID, out.Route.Reason)
				}
				fmt.Printf("message %d -> %s: %s\n", out.Message.ID, out.Route.Folder, out.Route.Reason)
				return nil
			})
		},
	}
	messageFlags(send, &in)
	send.Flags().StringVar(&in.PlatformID, "platform-id", "", "platform message id (repeats are ignored)")
	send.Flags().StringVar(&in.ReplyTo, "reply-to", "", "platform id this message answers")
	send.Flags().BoolVar(&noWait, "no-wait", false, "post and return without waiting for the reply")
	return send
}

// newResolveCmd is `arizuko resolve`.
func newResolveCmd(a *app) *cobra.Command {

	var rin service.MessageIn
	resolve := &cobra.Command{
		Use:   "resolve CHAT",
		Short: "Show which folder and topic a message in CHAT would reach, and why",
		Args:  cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			rin.ChatJID = args[0]
			r, err := s.Resolve(ctx, rin)
			if err != nil || a.json {
				return jsonOr(r, err)
			}
			if !r.Routed() {
				fmt.Printf("unrouted: %s\n", r.Reason)
				return nil
			}
			target := r.Folder
			if r.Topic != "" {
				target += "#" + r.Topic
			}
			if r.Observe {
				target += " (observe: stored, no turn)"
			}
			fmt.Printf("%s\nvia %s: %s\n", target, r.How, r.Reason)
			return nil
		}),
	}
	messageFlags(resolve, &rin)
	return resolve
}

// newMessagesCmd is `arizuko messages`.
func newMessagesCmd(a *app) *cobra.Command {

	var after int64
	var limit int
	ls := &cobra.Command{
		Use: "messages CHAT", Short: "List a chat's stored messages", Args: cobra.ExactArgs(1),
		RunE: listing(a, "ID\tTIME\tDIR\tSENDER\tFOLDER\tTEXT",
			func(ctx context.Context, s service.Service, args []string) ([]store.Message, error) {
				return s.ListMessages(ctx, args[0], after, limit)
			},
			func(m store.Message) string {
				return fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%q", m.ID, time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339), m.Direction, m.Sender, m.Folder, m.Text)
			}),
	}
	ls.Flags().Int64Var(&after, "after", 0, "only ids above this")
	ls.Flags().IntVar(&limit, "limit", 100, "at most this many")
	return ls
}

// sendAndWait posts one message through the daemon as a one-line terminal
// chat: the reply comes back to this process's own adapter and is printed.
func sendAndWait(ctx context.Context, base, token string, in service.MessageIn, out io.Writer) error {
	var r router.Result
	if err := daemonCall(ctx, base, token, http.MethodPost, "/v1/resolve", in, &r); err != nil {
		return err
	}
	if !r.Routed() {
		return fmt.Errorf("not sent: %s", r.Reason)
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt)
	defer stop()
	c := &chatSession{base: base, token: token, folder: r.Folder, chat: in.ChatJID, sender: in.Sender, msg: in,
		in: strings.NewReader(in.Text + "\n"), out: out, status: io.Discard, poll: 500 * time.Millisecond}
	return c.run(ctx)
}
