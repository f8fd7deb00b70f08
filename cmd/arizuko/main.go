// Command arizuko is the agent-tenancy control plane: folders, routes,
// grants, network rules and secrets, served over HTTP by `arizuko serve` and
// managed by the same CLI against the daemon or directly on the data dir.
package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/buildinfo"
	"github.com/crackbox/crackbox/internal/logsetup"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
)

// app holds what the root's persistent flags set; every command reads them
// through it, so no flag value lives in a package variable.
type app struct {
	data, server, token, config, logLevel string
	store                                 string // --store, see store.go
	json                                  bool
}

// newRootCmd builds the whole command tree.
func newRootCmd() *cobra.Command {
	a := &app{}
	root := &cobra.Command{
		Use:   "arizuko",
		Short: "Agent tenancy: folders, routes, grants, network rules and secrets",
		Long: `arizuko manages agent tenants (folders), how inbound messages reach them
(routes), what they may do (grants), where their guests may connect (network
rules) and the secrets their turns receive.

Commands talk to a running daemon (--server, or the one serving --data) and
otherwise open the data dir directly.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Get().String(),
		PersistentPreRunE: func(*cobra.Command, []string) error {
			return setupLog(firstNonEmpty(a.logLevel, "warn"))
		},
	}
	root.SetVersionTemplate("arizuko {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&a.data, "data", "", "data dir (default $ARIZUKO_DATA, config data_dir, $XDG_DATA_HOME/arizuko, or /var/lib/arizuko as root)")
	pf.StringVar(&a.server, "server", "", "daemon URL, e.g. http://127.0.0.1:7480 (default $ARIZUKO_SERVER)")
	pf.StringVar(&a.token, "token", "", "bearer token for --server (default $ARIZUKO_TOKEN, then <data>/token)")
	pf.StringVar(&a.config, "config", "", "config file (default $ARIZUKO_CONFIG, then <data>/arizuko.toml if present)")
	pf.BoolVar(&a.json, "json", false, "print JSON instead of tables")
	a.storeFlag(pf)
	pf.StringVar(&a.logLevel, "log-level", "", "log level: debug, info, warn or error (default warn; serve: log.level or info)")
	root.AddCommand(
		newInitCmd(a), newServeCmd(a), newChatCmd(a),
		newSendCmd(a), newResolveCmd(a), newMessagesCmd(a),
		newFolderCmd(a), newRouteCmd(a), newNetworkCmd(a), newSecretCmd(a),
		newGrantCmd(a), newAuditCmd(a), newObserveCmd(a), newTokenCmd(a), newTurnsCmd(a),
		newHookCmd(a), newScheduleCmd(a),
		newManPagesCmd(), newRunnerCmd(a), newAdapterCmd(a), newHomeCmd(a),
	)
	a.decorate(root)
	return root
}

func setupLog(level string) error {
	lvl, err := logsetup.ParseLevel(level)
	if err != nil {
		return err
	}
	log, _ := logsetup.New(os.Stderr, lvl)
	slog.SetDefault(log)
	return nil
}

func main() {
	arizukoTable.WarnUnknown(os.Stderr, os.Environ())
	err := newRootCmd().Execute()
	if err == nil {
		return
	}
	fmt.Fprintln(os.Stderr, "arizuko:", err)
	switch service.Code(err) {
	case service.CodeInvalid:
		os.Exit(2)
	case service.CodeDenied:
		os.Exit(3)
	case service.CodeNotFound:
		os.Exit(4)
	}
	os.Exit(1)
}
