package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/crackbox/crackbox/internal/logsetup"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// flagBind ties a command-line flag to the config key it overrides.
type flagBind struct{ flag, key string }

// addConfigFlag adds --config to cmd; commands that read crackbox.toml call it.
func addConfigFlag(cmd *cobra.Command) {
	cmd.Flags().String("config", "", "config file (default: first of $XDG_CONFIG_HOME/crackbox/crackbox.toml, ~/.config/crackbox/crackbox.toml, /etc/crackbox/crackbox.toml)")
}

// configSource turns --config and the flags the user actually set into a
// config.Source; keeping the Source lets SIGHUP reload with the same flags.
func configSource(cmd *cobra.Command, binds []flagBind) config.Source {
	var src config.Source
	if f := cmd.Flags().Lookup("config"); f != nil {
		src.Path = f.Value.String()
	}
	for _, b := range binds {
		f := cmd.Flags().Lookup(b.flag)
		if f == nil || !f.Changed {
			continue
		}
		val := f.Value.String()
		if sv, ok := f.Value.(interface{ GetSlice() []string }); ok {
			val = strings.Join(sv.GetSlice(), ",")
		}
		src.Overrides = append(src.Overrides, config.Override{Key: b.key, Value: val})
	}
	return src
}

// loadConfig loads the configuration for cmd with flags bound to keys.
func loadConfig(cmd *cobra.Command, binds []flagBind) (*config.Config, config.Source, error) {
	src := configSource(cmd, binds)
	cfg, err := config.Load(src)
	return cfg, src, err
}

// newLogger returns a text logger on stderr whose level follows log.level;
// the LevelVar lets a reload change it.
func newLogger(cfg *config.Config) (*slog.Logger, *slog.LevelVar) {
	return logsetup.New(os.Stderr, cfg.Log.SlogLevel())
}

// cacheDir is run.cache, else jail's default cache.
func cacheDir(r config.Run) string {
	if r.Cache != "" {
		return r.Cache
	}
	return install.CacheDir()
}
