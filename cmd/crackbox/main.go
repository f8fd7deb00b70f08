// Command crackbox runs one untrusted command in a throwaway guest whose only way
// out is an allowlist egress proxy, and serves that proxy as a standalone daemon.
package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/buildinfo"
)

// newRootCmd builds the command tree, each subcommand from its own file's
// constructor, with every command's examples in place.
func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "crackbox",
		Short:         "Run untrusted commands in a throwaway guest behind an allowlist egress proxy",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().String(),
	}
	root.SetVersionTemplate("crackbox {{.Version}}\n")
	root.PersistentPreRun = func(cmd *cobra.Command, _ []string) {
		if quiet, _ := cmd.Flags().GetBool("quiet"); !quiet {
			warnUnknownEnv(cmd.ErrOrStderr(), os.Environ())
		}
	}
	root.AddCommand(newDoctorCmd(), newGCCmd(), newManPagesCmd(), newProxyCmd(), newRunCmd(),
		newRunsCmd(), newSetupCmd(), newStateCmd())
	applyExamples(root)
	return root
}

// exitError carries a specific exit status out of a subcommand.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func main() {
	err := newRootCmd().Execute()
	var ee exitError
	switch {
	case err == nil:
	case errors.As(err, &ee):
		os.Exit(ee.code)
	default:
		fmt.Fprintln(os.Stderr, "crackbox:", err)
		os.Exit(125)
	}
}
