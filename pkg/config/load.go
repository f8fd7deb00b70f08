package config

import (
	"fmt"
	"os"
	"path/filepath"
)

// Override is one flag value, applied after the file and the environment.
type Override struct {
	Key   string // dotted key, e.g. "proxy.listen"
	Value string // text as Set accepts it
}

// Source says where a configuration comes from. The zero value searches the
// standard paths and reads the process environment.
type Source struct {
	Path      string                      // explicit --config; must exist when set
	LookupEnv func(string) (string, bool) // nil means os.LookupEnv
	Overrides []Override                  // flags, highest precedence
}

// maxFile bounds a config file read through hostfile.
const maxFile = 4 << 20

// systemPath is the last place Load looks; a variable so tests can move it.
var systemPath = "/etc/crackbox/crackbox.toml"

// SearchPaths lists the config files Load tries in order when no path is given.
func SearchPaths(lookupEnv func(string) (string, bool)) []string {
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	var paths []string
	if xdg, ok := lookupEnv("XDG_CONFIG_HOME"); ok && xdg != "" {
		paths = append(paths, filepath.Join(xdg, "crackbox", "crackbox.toml"))
	}
	if home, ok := lookupEnv("HOME"); ok && home != "" {
		paths = append(paths, filepath.Join(home, ".config", "crackbox", "crackbox.toml"))
	}
	return append(paths, systemPath)
}

// Load builds the configuration: defaults, then the first config file found,
// then CRACKBOX_* environment variables, then overrides; and validates it.
func Load(src Source) (*Config, error) {
	cfg := Default()
	file, err := Crackbox.Load(cfg, src, SearchPaths(src.LookupEnv))
	if err != nil {
		return nil, err
	}
	cfg.File = file
	if err := cfg.Validate(); err != nil {
		if cfg.File != "" {
			return nil, fmt.Errorf("config (file %s): %w", cfg.File, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}
