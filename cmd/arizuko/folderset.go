package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// newFolderSetCmd is `arizuko folder set`.
func newFolderSetCmd(a *app) *cobra.Command {
	var in service.FolderSet
	var agent, stdoutReply string
	set := &cobra.Command{
		Use:   "set PATH",
		Short: "Change a folder's agent command, environment or stdout reply fallback",
		Long: `Change what a folder's turns run: --agent replaces the agent command,
--env KEY=VALUE sets a variable in the agent's environment (repeatable),
--unset-env KEY removes one. The environment is not secret: the guest sees it,
so credentials go in sealed secrets (arizuko secret set) with an inject or
shell:env grant. A key the host sets for the turn (ARIZUKO_*, a granted
secret, an injected placeholder) wins over the folder's.

--stdout-reply on delivers the agent's stdout as the reply of a turn in which
it called no reply tool, for agents that print their answer; off (the
default) tells the chat that the turn went unanswered instead.`,
		Args: cobra.ExactArgs(1),
		RunE: a.run(func(ctx context.Context, s service.Service, args []string) error {
			if agent != "" {
				in.AgentCommand = strings.Fields(agent)
			}
			switch stdoutReply {
			case "":
			case "on", "true":
				in.StdoutReply = new(bool)
				*in.StdoutReply = true
			case "off", "false":
				in.StdoutReply = new(bool)
			default:
				return fmt.Errorf("--stdout-reply %q: want on or off: %w", stdoutReply, service.ErrInvalid)
			}
			if len(in.AgentCommand) == 0 && len(in.SetEnv) == 0 && len(in.UnsetEnv) == 0 && in.StdoutReply == nil {
				return fmt.Errorf("nothing to change: give --agent, --env, --unset-env or --stdout-reply: %w", service.ErrInvalid)
			}
			f, err := s.SetFolder(ctx, args[0], in)
			if err != nil || a.json {
				return jsonOr(f, err)
			}
			fmt.Printf("%s: agent %q, env %q, stdout reply %v\n", f.Path, strings.Join(f.AgentCommand, " "), f.AgentEnv, f.StdoutReply)
			return nil
		}),
	}
	set.Flags().StringVar(&agent, "agent", "", "agent command run in the guest for a turn (split on spaces)")
	set.Flags().StringArrayVar(&in.SetEnv, "env", nil, "KEY=VALUE to set in the agent's environment, repeatable")
	set.Flags().StringArrayVar(&in.UnsetEnv, "unset-env", nil, "KEY to remove from the agent's environment, repeatable")
	set.Flags().StringVar(&stdoutReply, "stdout-reply", "", "on: deliver the agent's stdout as the reply when it calls no reply tool; off: do not")
	set.Flags().Lookup("stdout-reply").NoOptDefVal = "on"
	return set
}

// newFolderHomeCmd is `arizuko folder home`.
func newFolderHomeCmd(a *app) *cobra.Command {
	var create bool
	home := &cobra.Command{
		Use:   "home PATH",
		Short: "Print a folder's home: the directory its guests get as $HOME",
		Long: `Print the host directory a folder's turns get read-write as their home,
resolved from the data dir as the daemon resolves it (--data, $ARIZUKO_DATA,
then data_dir in the config), for scripts that put files there.
--create makes it when the folder has not run a turn yet.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// A typo must not make a stray home: the folder has to exist.
			err := a.withService(cmd.Context(), func(ctx context.Context, s service.Service) error {
				fs, err := s.ListFolders(ctx)
				if err != nil {
					return err
				}
				for _, f := range fs {
					if f.Path == args[0] {
						return nil
					}
				}
				return fmt.Errorf("folder %q: %w; add it with `arizuko folder add %s`", args[0], service.ErrNotFound, args[0])
			})
			if err != nil {
				return err
			}
			cfg, err := a.loadConfig()
			if err != nil {
				return err
			}
			resolve := folder.Home
			if create {
				resolve = folder.EnsureHome
			}
			p, err := resolve(cfg.DataDir, args[0])
			if err != nil {
				return fmt.Errorf("%w: %w", err, service.ErrInvalid)
			}
			fmt.Println(p)
			return nil
		},
	}
	home.Flags().BoolVar(&create, "create", false, "create the home if it does not exist yet")
	return home
}
