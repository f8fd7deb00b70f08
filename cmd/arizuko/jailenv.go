package main

import (
	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/config"
)

// withCrackboxEnv fills the guest settings arizuko.toml leaves empty from the
// environment, under the names crackbox run reads (CRACKBOX_KERNEL, CRACKBOX_GUEST_INIT,
// CRACKBOX_ACCEL, CRACKBOX_CACHE, CRACKBOX_SNAPSHOT and their CRACKBOX_RUN_ forms):
// pkg/jail reads no environment itself. A value in the file wins.
func withCrackboxEnv(r *turn.JailRunner, lookup func(string) (string, bool)) *turn.JailRunner {
	for _, f := range []struct {
		key string
		dst *string
	}{
		{"run.kernel", &r.Kernel}, {"run.guest_init", &r.GuestInit}, {"run.accel", &r.Accel},
		{"run.cache", &r.CacheDir}, {"run.snapshot", &r.Snapshot},
	} {
		if *f.dst != "" {
			continue
		}
		// crackbox's own table reads them, so a name means what it does to crackbox run.
		*f.dst, _ = config.Crackbox.Preset(f.key, config.Source{LookupEnv: lookup})
	}
	return r
}
