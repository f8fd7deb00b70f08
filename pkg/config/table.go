package config

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/crackbox/crackbox/internal/hostfile"
)

// Table is one binary's settings. The keys are the fields of the binary's
// config struct, named by their toml tags as the file names them ("proxy.listen",
// "data_dir"); Env says which variables set which key. crackbox and arizuko both
// load through a Table, so precedence (flag > env > file > default), unknown keys,
// type errors and the unknown-variable warning mean the same in either.
type Table struct {
	Binary  string              // the program, in messages: "crackbox"
	Example string              // the file documenting every key, named in errors
	Prefix  string              // starts every variable the binary owns: "CRACKBOX_"
	Env     map[string][]string // key -> variables that set it, most specific first
	// ConfigEnv names the config file when no flag does ("" for none).
	ConfigEnv string
	// Other are variables with Prefix the binary reads besides keys, and
	// IgnorePrefix starts those that are not the binary's (test switches).
	Other        []string
	IgnorePrefix string
	// Renamed are variables no longer read, with their new names: setting one
	// is an error rather than an alias, since two names for one setting drift.
	Renamed map[string]string
	// EnvHint ends the unknown-variable warning: where the names are listed.
	EnvHint string
}

// Keys lists every dotted key of cfg, a pointer to the binary's config struct,
// in declaration order.
func (t *Table) Keys(cfg any) []string {
	var keys []string
	walk(structOf(cfg), "", func(key string, _ reflect.Value) { keys = append(keys, key) })
	return keys
}

// Set assigns a string value to the dotted key of cfg. Lists are comma
// separated; maps are "name=v[,v...][;name=v...]". An empty string clears the
// value, which for a listener disables it.
func (t *Table) Set(cfg any, key, value string) error {
	var target reflect.Value
	walk(structOf(cfg), "", func(k string, v reflect.Value) {
		if k == key {
			target = v
		}
	})
	if !target.IsValid() {
		return fmt.Errorf("%w %q (known: %s)", ErrUnknownSetting, key, strings.Join(t.Keys(cfg), ", "))
	}
	if err := setValue(target, value); err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	return nil
}

// lookupOf is src's environment, os.LookupEnv when unset.
func lookupOf(src Source) func(string) (string, bool) {
	if src.LookupEnv != nil {
		return src.LookupEnv
	}
	return os.LookupEnv
}

// Preset is the value a flag or variable gives key before any file is read,
// for settings that say where the file is (arizuko's data_dir).
func (t *Table) Preset(key string, src Source) (string, bool) {
	for i := len(src.Overrides) - 1; i >= 0; i-- {
		if src.Overrides[i].Key == key {
			return src.Overrides[i].Value, true
		}
	}
	lookup := lookupOf(src)
	for _, name := range t.Env[key] {
		if v, ok := lookup(name); ok {
			return v, true
		}
	}
	return "", false
}

// FromEnv says whether a variable gives key a non-empty value.
func (t *Table) FromEnv(key string, src Source) bool {
	lookup := lookupOf(src)
	for _, name := range t.Env[key] {
		if v, ok := lookup(name); ok {
			return v != ""
		}
	}
	return false
}

// Load fills cfg, which holds the defaults, from the config file, then the
// environment, then src.Overrides (the flags), and returns the file it read
// ("" when none). The file is src.Path, else $ConfigEnv (either must exist),
// else the first of search that exists. Validation is the caller's.
func (t *Table) Load(cfg any, src Source, search []string) (string, error) {
	lookup := lookupOf(src)
	for old, name := range t.Renamed {
		if v, ok := lookup(old); ok && v != "" {
			return "", fmt.Errorf("$%s is no longer read: rename it to $%s", old, name)
		}
	}
	path, given := src.Path, "--config"
	if path == "" && t.ConfigEnv != "" {
		path, _ = lookup(t.ConfigEnv)
		given = "$" + t.ConfigEnv
	}
	file, err := t.readFile(cfg, path, given, search)
	if err != nil {
		return "", err
	}
	if err := t.Resolve(cfg, src); err != nil {
		return "", err
	}
	return file, nil
}

// readFile decodes the named file, or the first of search that exists.
func (t *Table) readFile(cfg any, path, given string, search []string) (string, error) {
	if path != "" {
		// A path named on the command line may lie in a workdir a sandbox
		// could write; the search paths are the operator's own.
		data, err := hostfile.ReadFile(path, maxFile)
		if errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("config file %s given with %s does not exist: %w", path, given, err)
		}
		if err != nil {
			return "", fmt.Errorf("config: %w", err)
		}
		return path, decode(path, data, cfg, t.Example)
	}
	for _, p := range search {
		data, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("config: %w", err)
		}
		return p, decode(p, data, cfg, t.Example)
	}
	return "", nil
}

// Resolve applies the environment, then src.Overrides, to cfg. A variable that
// is set, even to the empty string, wins over the file.
func (t *Table) Resolve(cfg any, src Source) error {
	lookup := lookupOf(src)
	var errs []error
	keys := t.Keys(cfg)
	sort.Strings(keys)
	for _, key := range keys {
		for _, name := range t.Env[key] {
			val, ok := lookup(name)
			if !ok {
				continue
			}
			if err := t.Set(cfg, key, val); err != nil {
				errs = append(errs, fmt.Errorf("environment %s: %w", name, err))
			}
			break
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for _, o := range src.Overrides {
		if err := t.Set(cfg, o.Key, o.Value); err != nil {
			return fmt.Errorf("flag: %w", err)
		}
	}
	return nil
}

// Known is every variable the binary reads.
func (t *Table) Known() []string {
	var names []string
	for _, env := range t.Env {
		names = append(names, env...)
	}
	names = append(names, t.Other...)
	if t.ConfigEnv != "" {
		names = append(names, t.ConfigEnv)
	}
	sort.Strings(names)
	return slices.Compact(names)
}

// WarnUnknown names the variables in environ that carry Prefix but that the
// binary does not read: a typo (CRACKBOX_KERNAL) would otherwise be ignored
// without a word.
func (t *Table) WarnUnknown(w io.Writer, environ []string) {
	known := t.Known()
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, t.Prefix) || (t.IgnorePrefix != "" && strings.HasPrefix(name, t.IgnorePrefix)) {
			continue
		}
		if _, found := slices.BinarySearch(known, name); !found {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range slices.Compact(unknown) {
		fmt.Fprintf(w, "%s: warning: ignoring unknown environment variable %s (%s)\n", t.Binary, name, t.EnvHint)
	}
}
