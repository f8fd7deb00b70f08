package main

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"

	"github.com/crackbox/crackbox/internal/natsauth"
	"github.com/crackbox/crackbox/pkg/admin"
	"github.com/crackbox/crackbox/pkg/admin/fleet"
)

// openRegistry fills the daemon's registry: from the configured single client
// (and, through the admin server, the state file), or from the shared bucket of
// proxy.registry. A replica that cannot read the bucket does not start: it has
// never seen a client, so it could only refuse everyone while looking healthy;
// refusing the start says at once which input is wrong, and systemd's Restart=
// brings it up when NATS is back. A running replica that loses NATS keeps its
// last copy instead (see package fleet).
func (d *daemon) openRegistry(ctx context.Context) error {
	p := d.cfg.Proxy
	if p.Registry == "" {
		return d.setClient(d.cfg)
	}
	auth := natsauth.Auth{URL: p.Registry, Creds: p.RegistryCreds, NKey: p.RegistryNKey, CA: p.RegistryCA, Insecure: p.RegistryInsecure}
	if err := auth.Check("proxy.registry_nkey or proxy.registry_creds"); err != nil {
		return fmt.Errorf("proxy.registry: %w", err)
	}
	for _, f := range []struct{ key, path string }{
		{"proxy.registry_creds", p.RegistryCreds}, {"proxy.registry_nkey", p.RegistryNKey}, {"proxy.registry_ca", p.RegistryCA},
		{"proxy.registry_sign_key", p.RegistrySignKey},
	} {
		if f.path == "" {
			continue
		}
		if _, err := os.Stat(f.path); err != nil {
			return fmt.Errorf("%s: %w", f.key, err)
		}
	}
	if err := fleet.CheckSigners(p.RegistrySigners); err != nil {
		return fmt.Errorf("proxy.registry_signers: %w", err)
	}
	o := fleet.Options{
		URL: p.Registry, Creds: p.RegistryCreds, NKey: p.RegistryNKey, CA: p.RegistryCA, Insecure: p.RegistryInsecure,
		Signers: p.RegistrySigners, Replica: d.replica, Registry: d.reg, Registerer: d.prom, Log: d.log.With("replica", d.replica),
	}
	if p.RegistrySignKey != "" {
		var err error
		if o.Signer, err = fleet.LoadSigner(p.RegistrySignKey); err != nil {
			return fmt.Errorf("proxy.registry_sign_key: %w", err)
		}
	}
	if p.RegistryInsecure {
		d.log.Warn("registry nats without required credentials or tls", "flag", natsauth.Flag, "nats", redactURLs(p.Registry))
	}
	if ctx == nil {
		ctx = context.Background()
	}
	fl, err := fleet.Open(ctx, o)
	urls := redactURLs(p.Registry)
	switch {
	case errors.Is(err, fleet.ErrAuth):
		return fmt.Errorf("proxy.registry %s: %w; check proxy.registry_creds, proxy.registry_nkey or the user:password in the URL", urls, err)
	case errors.Is(err, fleet.ErrUnreachable):
		return fmt.Errorf("proxy.registry %s: %w; check the URLs and that the NATS servers are up (a replica starts only with a first copy of the registry)", urls, err)
	case err != nil:
		return fmt.Errorf("proxy.registry %s: %w", urls, err)
	}
	d.fleet = fl
	d.log.Info("registry shared", "replica", d.replica, "nats", urls, "bucket", fleet.DefaultBucket, "clients", len(d.reg.List()),
		"signs", o.Signer != nil)
	return nil
}

// Shared reports the registry for /health; nil when it is local.
func (d *daemon) shared() admin.Shared {
	if d.fleet == nil {
		return nil
	}
	return d.fleet
}

func (d *daemon) registryKind() string {
	if d.fleet == nil {
		return "local"
	}
	return "shared"
}

// replicaID is proxy.replica, else the host name.
func replicaID(cfgReplica string) string {
	if cfgReplica != "" {
		return cfgReplica
	}
	if h, err := os.Hostname(); err == nil {
		return h
	}
	return "unknown"
}

// redactURLs hides credentials in a comma-separated URL list for messages.
func redactURLs(list string) string {
	parts := strings.Split(list, ",")
	for i, s := range parts {
		if u, err := url.Parse(strings.TrimSpace(s)); err == nil {
			if u.User != nil {
				u.User = url.User("redacted") // a token may sit where the user name does
			}
			parts[i] = u.String()
		}
	}
	return strings.Join(parts, ",")
}
