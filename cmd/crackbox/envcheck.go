package main

import (
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/crackbox/crackbox/internal/envvar"
	"github.com/crackbox/crackbox/pkg/config"
)

// knownEnv is every CRACKBOX_* variable crackbox reads.
func knownEnv() map[string]bool {
	known := map[string]bool{}
	for _, k := range config.Keys() {
		for _, n := range config.EnvNames(k) {
			known[n] = true
		}
	}
	for _, n := range envvar.Names {
		known[n] = true
	}
	return known
}

// warnUnknownEnv names CRACKBOX_* variables that crackbox does not read: a typo
// (CRACKBOX_KERNAL) would otherwise be ignored without a word.
func warnUnknownEnv(w io.Writer, environ []string) {
	known := knownEnv()
	var unknown []string
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "CRACKBOX_") && !known[name] && !strings.HasPrefix(name, envvar.TestPrefix) {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		fmt.Fprintf(w, "crackbox: warning: ignoring unknown environment variable %s (config keys are CRACKBOX_<SECTION>_<KEY>, see crackbox.toml.example)\n", name)
	}
}
