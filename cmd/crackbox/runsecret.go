package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/crackbox/crackbox/internal/hostfile"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/proxy/inject"
)

// errSecretSyntax explains the --secret syntax.
var errSecretSyntax = errors.New("want NAME@host[,host...][=env:OTHER|=file:PATH]")

// parseSecretFlag parses one --secret value.
func parseSecretFlag(s string) (config.RunSecret, error) {
	spec, from, _ := strings.Cut(s, "=")
	name, hosts, ok := strings.Cut(spec, "@")
	if !ok || name == "" || hosts == "" {
		return config.RunSecret{}, fmt.Errorf("--secret %q: %w", s, errSecretSyntax)
	}
	rs := config.RunSecret{Name: name, From: from}
	for _, h := range strings.Split(hosts, ",") {
		if h = strings.TrimSpace(h); h != "" {
			rs.Hosts = append(rs.Hosts, h)
		}
	}
	return rs, nil
}

// runSecrets gathers [[run.secret]] and --secret (a flag replaces a file
// entry of the same name) and reads their values from the invoking
// environment or files.
func runSecrets(cfg *config.Config, flags []string, lookup func(string) (string, bool)) ([]inject.Secret, error) {
	list := append([]config.RunSecret(nil), cfg.Run.Secret...)
	for _, f := range flags {
		rs, err := parseSecretFlag(f)
		if err != nil {
			return nil, err
		}
		list = append(list, rs)
	}
	byName := map[string]int{}
	var out []inject.Secret
	for _, rs := range list {
		val, err := secretValue(rs, lookup)
		if err != nil {
			return nil, err
		}
		s := inject.Secret{Name: rs.Name, Hosts: rs.Hosts, Value: val}
		if i, ok := byName[rs.Name]; ok {
			out[i] = s
			continue
		}
		byName[rs.Name] = len(out)
		out = append(out, s)
	}
	return out, nil
}

// maxSecretFile bounds a =file:PATH value source; a credential is one line.
const maxSecretFile = 64 << 10

// secretValue reads a secret's value; its text never goes into an error.
func secretValue(rs config.RunSecret, lookup func(string) (string, bool)) (string, error) {
	kind, arg, _ := strings.Cut(rs.From, ":")
	switch {
	case rs.From == "":
		kind, arg = "env", rs.Name
	case arg == "":
		return "", fmt.Errorf("secret %s: source %q: want env:NAME or file:PATH", rs.Name, rs.From)
	}
	switch kind {
	case "env":
		v, ok := lookup(arg)
		if !ok || v == "" {
			return "", fmt.Errorf("secret %s: environment variable %s is not set: export it, or name another source with =env:OTHER or =file:PATH", rs.Name, arg)
		}
		return v, nil
	case "file":
		b, err := hostfile.ReadFile(arg, maxSecretFile)
		if err != nil {
			return "", fmt.Errorf("secret %s: %w", rs.Name, err)
		}
		return strings.TrimRight(string(b), "\r\n"), nil
	}
	return "", fmt.Errorf("secret %s: source %q: want env:NAME or file:PATH", rs.Name, rs.From)
}

// secretSet builds the run's secrets, refusing combinations that would put
// a value in the guest or give the proxy nowhere to inject.
func secretSet(secrets []inject.Secret, env []string, mode string) (*inject.Set, error) {
	if len(secrets) == 0 {
		return nil, nil
	}
	if mode == "none" {
		return nil, errors.New("--secret needs a network: the proxy injects the value; drop --net none")
	}
	for _, s := range secrets {
		for _, kv := range env {
			if k, _, _ := strings.Cut(kv, "="); k == s.Name {
				return nil, fmt.Errorf("%s is both a --secret and an -e variable: drop the -e, the guest gets its placeholder", s.Name)
			}
		}
	}
	set, err := inject.New(secrets)
	if err != nil {
		return nil, fmt.Errorf("--secret: %w", err)
	}
	return set, nil
}
