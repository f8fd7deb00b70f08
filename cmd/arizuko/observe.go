package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/service"
)

// newObserveCmd is `arizuko observe`.
func newObserveCmd(a *app) *cobra.Command {
	ls := &cobra.Command{
		Use: "ls [OBSERVER]", Short: "List which folders observe which (an observation is used only while its grant holds)", Args: cobra.MaximumNArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			observer := ""
			if len(args) == 1 {
				observer = args[0]
			}
			out, err := s.ListObservations(ctx, observer)
			if err != nil || a.json {
				return jsonOr(out, err)
			}
			table("OBSERVER\tSOURCE\tSINCE", func(w *tabwriter.Writer) {
				for _, o := range out {
					fmt.Fprintf(w, "%s\t%s\t%s\n", o.Observer, o.Source, time.UnixMilli(o.CreatedAt).Format(time.DateTime))
				}
			})
			return nil
		}),
	}
	rm := &cobra.Command{
		Use: "rm OBSERVER SOURCE", Short: "End OBSERVER's observation of SOURCE", Args: cobra.ExactArgs(2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			return s.RemoveObservation(ctx, args[0], args[1])
		}),
	}
	return group("observe", "List and end folder observations (observe_group)", ls, rm)
}
