package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/crackbox/crackbox/internal/hostfile"
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
	lookup := src.LookupEnv
	if lookup == nil {
		lookup = os.LookupEnv
	}
	cfg := Default()
	if src.Path != "" {
		// A path named on the command line may lie in a workdir a sandbox
		// could write; the search paths are the operator's own.
		data, err := hostfile.ReadFile(src.Path, maxFile)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("config file %s given with --config does not exist: %w", src.Path, err)
		}
		if err != nil {
			return nil, fmt.Errorf("config: %w", err)
		}
		if err := Decode(src.Path, data, cfg); err != nil {
			return nil, err
		}
		cfg.File = src.Path
	} else {
		for _, path := range SearchPaths(lookup) {
			err := DecodeFile(path, cfg)
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return nil, err
			}
			cfg.File = path
			break
		}
	}
	if err := cfg.applyEnv(lookup); err != nil {
		return nil, err
	}
	for _, o := range src.Overrides {
		if err := cfg.Set(o.Key, o.Value); err != nil {
			return nil, fmt.Errorf("flag: %w", err)
		}
	}
	if err := cfg.Validate(); err != nil {
		if cfg.File != "" {
			return nil, fmt.Errorf("config (file %s): %w", cfg.File, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	return cfg, nil
}
