package main

import (
	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManPagesCmd is the hidden `arizuko man-pages`.
func newManPagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man-pages DIR",
		Short:  "Write a man page for every command into DIR (make install uses it)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return doc.GenManTree(cmd.Root(), &doc.GenManHeader{Title: "ARIZUKO", Section: "1", Source: "arizuko"}, args[0])
		},
	}
}
