package config

import (
	"net/url"
	"strings"
)

// checkRegistry checks proxy.registry's NATS URLs and the keys that only make
// sense with it or against it.
func checkRegistry(p *Proxy) error {
	if p.Registry == "" {
		for _, k := range []struct{ key, val string }{
			{"proxy.registry_creds", p.RegistryCreds}, {"proxy.registry_nkey", p.RegistryNKey}, {"proxy.registry_ca", p.RegistryCA},
			{"proxy.registry_sign_key", p.RegistrySignKey}, {"proxy.registry_signers", strings.Join(p.RegistrySigners, ",")},
		} {
			if k.val != "" {
				return invalid(k.key, "set without proxy.registry: it configures the connection to a shared registry")
			}
		}
		return nil
	}
	for _, s := range strings.Split(p.Registry, ",") {
		u, err := url.Parse(strings.TrimSpace(s))
		if err != nil || u.Host == "" || (u.Scheme != "nats" && u.Scheme != "tls") {
			return invalid("proxy.registry", "%q: write NATS URLs like \"nats://nats1:4222,nats://nats2:4222\" (tls:// for TLS)", s)
		}
	}
	if p.RegistryCreds != "" && p.RegistryNKey != "" {
		return invalid("proxy.registry_nkey", "set with proxy.registry_creds: pick one way to authenticate")
	}
	if p.RegistrySignKey == "" && len(p.RegistrySigners) == 0 {
		return invalid("proxy.registry", "needs proxy.registry_sign_key (the nkey seed this replica's admin API signs entries with) or proxy.registry_signers (the public keys of the replicas that sign): a replica enforces only signed entries")
	}
	if p.StateFile != "" {
		return invalid("proxy.state_file", "set with proxy.registry: the shared bucket holds the registry; remove one")
	}
	if p.Client != "" {
		return invalid("proxy.client", "set with proxy.registry: register the client through the admin API so every replica has it")
	}
	return nil
}
