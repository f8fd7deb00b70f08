package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// newObserveCmd is `arizuko observe`.
func newObserveCmd(a *app) *cobra.Command {
	ls := &cobra.Command{
		Use: "ls [OBSERVER]", Short: "List which folders observe which (an observation is used only while its grant holds)", Args: cobra.MaximumNArgs(1),
		RunE: listing(a, "OBSERVER\tSOURCE\tSINCE",
			func(ctx context.Context, s service.Service, args []string) ([]store.Observation, error) {
				observer := ""
				if len(args) == 1 {
					observer = args[0]
				}
				return s.ListObservations(ctx, observer)
			},
			func(o store.Observation) string {
				return fmt.Sprintf("%s\t%s\t%s", o.Observer, o.Source, time.UnixMilli(o.CreatedAt).Format(time.DateTime))
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
