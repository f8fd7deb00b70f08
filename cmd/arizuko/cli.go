package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// table prints rows under header, aligned in columns.
func table(header string, rows func(w *tabwriter.Writer)) {
	w := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, header)
	rows(w)
	w.Flush()
}

// group is a parent command that only holds subs.
func group(use, short string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs}
	c.AddCommand(subs...)
	return c
}

// run runs fn against the connected service (see connect).
func (a *app) run(fn func(ctx context.Context, s service.Service, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		return a.withService(cmd.Context(), func(ctx context.Context, s service.Service) error { return fn(ctx, s, args) })
	}
}

func jsonOr(v any, err error) error {
	if err != nil {
		return err
	}
	return printJSON(v)
}

func parseID(s string) (int64, error) {
	var id int64
	if _, err := fmt.Sscanf(s, "%d", &id); err != nil || id <= 0 || fmt.Sprint(id) != s {
		return 0, fmt.Errorf("id %q: want a positive integer: %w", s, service.ErrInvalid)
	}
	return id, nil
}

// listing runs fn and prints the rows it lists: JSON with --json, else a
// table of header and one row line per item.
func listing[T any](a *app, header string, fn func(context.Context, service.Service, []string) ([]T, error), row func(T) string) func(*cobra.Command, []string) error {
	return a.run(func(ctx context.Context, s service.Service, args []string) error {
		out, err := fn(ctx, s, args)
		if err != nil || a.json {
			return jsonOr(out, err)
		}
		table(header, func(w *tabwriter.Writer) {
			for _, v := range out {
				fmt.Fprintln(w, row(v))
			}
		})
		return nil
	})
}

// printJSON writes v as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// firstNonEmpty is the first non-empty string, for display defaults.
func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
