// Command arizuko is the agent-tenancy control plane: folders, routes,
// grants, network rules and secrets, served over HTTP by `arizuko serve` and
// managed by the same CLI against the daemon or directly on the data dir.
package main

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/pkg/buildinfo"
	"github.com/crackbox/crackbox/pkg/service"
)

// global flags
var (
	flagData     string
	flagServer   string
	flagToken    string
	flagConfig   string
	flagJSON     bool
	flagLogLevel string
)

var root = &cobra.Command{
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
	PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
		if cmd == serveCmd {
			return nil // serve also reads log.level from the config
		}
		return setupLog(firstNonEmpty(flagLogLevel, "warn"))
	},
}

func setupLog(level string) error {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(level)); err != nil {
		return fmt.Errorf("log level %q: want debug, info, warn or error", level)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: lvl})))
	return nil
}

func init() {
	root.SetVersionTemplate("arizuko {{.Version}}\n")
	pf := root.PersistentFlags()
	pf.StringVar(&flagData, "data", "", "data dir (default $ARIZUKO_DATA, config data_dir, $XDG_DATA_HOME/arizuko, or /var/lib/arizuko as root)")
	pf.StringVar(&flagServer, "server", "", "daemon URL, e.g. http://127.0.0.1:7480 (default $ARIZUKO_SERVER)")
	pf.StringVar(&flagToken, "token", "", "bearer token for --server (default $ARIZUKO_TOKEN, then <data>/token)")
	pf.StringVar(&flagConfig, "config", "", "config file (default $ARIZUKO_CONFIG, then <data>/arizuko.toml if present)")
	pf.BoolVar(&flagJSON, "json", false, "print JSON instead of tables")
	pf.StringVar(&flagLogLevel, "log-level", "", "log level: debug, info, warn or error (default warn; serve: log.level or info)")
}

func main() {
	decorate(root)
	err := root.Execute()
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

// printJSON writes v as indented JSON.
func printJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
