package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// parseBudget reads N (0 = unlimited) or "default".
func parseBudget(s string) (service.BudgetIn, error) {
	if s == "default" {
		return service.BudgetIn{}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return service.BudgetIn{}, fmt.Errorf("turn budget %q: want 0 (unlimited) to %d turns per day, or default: %w", s, service.MaxTurnBudget, service.ErrInvalid)
	}
	return service.BudgetIn{MaxTurnsPerDay: &n}, nil
}

// newBudgetCmd is `arizuko folder budget`.
func newBudgetCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "budget FOLDER [N|default]",
		Short: "Show or set a folder's turn budget (turns per sliding 24 h; 0 = unlimited)",
		Long: `Show a folder's turn budget and its use over the last 24 hours, or set it:
N caps the folder at N turns started per sliding 24 h (0 = unlimited),
"default" returns it to [turns] max_turns_per_day. A turn past the budget
fails as quota-exhausted without starting a guest; its messages stay stored
and the chat is told.`,
		Args: cobra.RangeArgs(1, 2),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			var b service.FolderBudget
			var err error
			if len(args) == 2 {
				in, perr := parseBudget(args[1])
				if perr != nil {
					return perr
				}
				b, err = s.SetBudget(ctx, args[0], in)
			} else {
				b, err = s.GetBudget(ctx, args[0])
			}
			if err != nil || a.json {
				return jsonOr(b, err)
			}
			src := "instance default"
			if b.Own != nil {
				src = "folder setting"
			}
			limit := "unlimited"
			if b.Effective > 0 {
				limit = fmt.Sprintf("%d per day", b.Effective)
			}
			fmt.Printf("%s: %s (%s); %d turns started in the last 24h\n", b.Folder, limit, src, b.Used)
			return nil
		}),
	}
}
