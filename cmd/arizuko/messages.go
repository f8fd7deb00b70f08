package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/service"
)

func messageFlags(c *cobra.Command, in *service.MessageIn) {
	c.Flags().StringVar(&in.Sender, "sender", "cli", "sender id")
	c.Flags().StringVar(&in.Platform, "platform", "cli", "platform name")
	c.Flags().StringVar(&in.Room, "room", "", "room")
	c.Flags().StringVar(&in.Verb, "verb", "", "verb (e.g. join)")
}

func init() {
	var in service.MessageIn
	send := &cobra.Command{
		Use:   "send CHAT TEXT",
		Short: "Post an inbound message to CHAT (web:<folder> addresses a folder directly)",
		Args:  cobra.ExactArgs(2),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			in.ChatJID, in.Text = args[0], args[1]
			out, err := s.PostMessage(ctx, in)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			dest := out.Route.Folder
			if !out.Route.Routed() {
				dest = "(unrouted)"
			}
			fmt.Printf("message %d -> %s: %s\n", out.Message.ID, dest, out.Route.Reason)
			return nil
		}),
	}
	messageFlags(send, &in)
	send.Flags().StringVar(&in.PlatformID, "platform-id", "", "platform message id (repeats are ignored)")
	send.Flags().StringVar(&in.ReplyTo, "reply-to", "", "platform id this message answers")

	var rin service.MessageIn
	resolve := &cobra.Command{
		Use:   "resolve CHAT",
		Short: "Show which folder and topic a message in CHAT would reach, and why",
		Args:  cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			rin.ChatJID = args[0]
			r, err := s.Resolve(ctx, rin)
			if err != nil || flagJSON {
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

	var after int64
	var limit int
	ls := &cobra.Command{
		Use: "messages CHAT", Short: "List a chat's stored messages", Args: cobra.ExactArgs(1),
		RunE: run(func(ctx context.Context, s service.Service, args []string) error {
			out, err := s.ListMessages(ctx, args[0], after, limit)
			if err != nil || flagJSON {
				return jsonOr(out, err)
			}
			table("ID\tTIME\tDIR\tSENDER\tFOLDER\tTEXT", func(w *tabwriter.Writer) {
				for _, m := range out {
					fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%q\n", m.ID, time.UnixMilli(m.CreatedAt).UTC().Format(time.RFC3339), m.Direction, m.Sender, m.Folder, m.Text)
				}
			})
			return nil
		}),
	}
	ls.Flags().Int64Var(&after, "after", 0, "only ids above this")
	ls.Flags().IntVar(&limit, "limit", 100, "at most this many")
	root.AddCommand(send, resolve, ls)
}
