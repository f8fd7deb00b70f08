package config

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/crackbox/crackbox/pkg/proxy/allow"
)

// ErrInvalid marks a value that failed validation; the message names the key and the fix.
var ErrInvalid = errors.New("invalid value")

func invalid(key, format string, args ...any) error {
	return fmt.Errorf("%s: %w: %s", key, ErrInvalid, fmt.Sprintf(format, args...))
}

// Validate checks every value and normalises a few (resolver gains :53).
// All problems are reported together.
func (c *Config) Validate() error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	p := &c.Proxy
	add(checkListen("proxy.listen", p.Listen))
	add(checkListen("proxy.transparent", p.Transparent))
	add(checkListen("admin.listen", c.Admin.Listen))
	add(checkListen("admin.metrics_listen", c.Admin.MetricsListen))
	if _, err := allow.Parse(p.Allow); err != nil {
		add(invalid("proxy.allow", "%v", err))
	}
	_, err := p.CIDRs()
	add(err)
	for _, port := range p.DefaultPorts {
		if port < 1 || port > 65535 {
			add(invalid("proxy.default_ports", "port %d out of range 1-65535", port))
		}
	}
	if p.Resolver != "" {
		r, err := normResolver(p.Resolver)
		if err != nil {
			add(invalid("proxy.resolver", "%q: %v; write an IP with optional port, like \"1.1.1.1:53\"", p.Resolver, err))
		} else {
			p.Resolver = r
		}
	}
	for name, addrs := range p.Hosts {
		if name == "" || strings.ContainsAny(name, " \t/:") {
			add(invalid("proxy.hosts", "name %q: write a host name", name))
		}
		if len(addrs) == 0 {
			add(invalid("proxy.hosts", "name %q has no addresses: list one or more IPs", name))
		}
	}
	_, err = p.HostAddrs()
	add(err)
	if p.DialTimeout.Duration == 0 {
		add(invalid("proxy.dial_timeout", "must be positive, like \"10s\""))
	}
	if p.HeaderTimeout.Duration <= 0 {
		add(invalid("proxy.header_timeout", "must be positive, like \"30s\""))
	}
	if p.MaxClientConns < 1 {
		add(invalid("proxy.max_client_conns", "%d: allow each client at least one connection, e.g. 512", p.MaxClientConns))
	}
	add(checkRegistry(p))
	if p.Client != "" {
		if _, err := netip.ParseAddr(p.Client); err != nil {
			add(invalid("proxy.client", "%q is not an IP address", p.Client))
		}
	}

	r := &c.Run
	if !slices.Contains(Accels, r.Accel) {
		add(invalid("run.accel", "%q: use one of %s", r.Accel, strings.Join(Accels, ", ")))
	}
	if r.Memory < 64<<20 {
		add(invalid("run.memory", "%s is too small: give the guest at least 64M", r.Memory))
	}
	if r.CPUs < 1 || r.CPUs > 256 {
		add(invalid("run.cpus", "%d: use 1-256", r.CPUs))
	}
	if !slices.Contains(NetModes, r.Net) {
		add(invalid("run.net", "%q: use one of %s", r.Net, strings.Join(NetModes, ", ")))
	}
	if r.AddrPool == "" {
		add(invalid("run.addr_pool", "\"\": write an IPv4 CIDR of /30 or wider, like \"10.213.0.0/16\""))
	}
	_, err = r.AddrPoolPrefix()
	add(err)
	if !slices.Contains(Snapshots, r.Snapshot) {
		add(invalid("run.snapshot", "%q: use one of %s", r.Snapshot, strings.Join(Snapshots, ", ")))
	}
	if !slices.Contains(WorkdirSyncs, r.WorkdirSync) {
		add(invalid("run.workdir_sync", "%q: use one of %s", r.WorkdirSync, strings.Join(WorkdirSyncs, ", ")))
	}
	if r.Cache != "" && !filepath.IsAbs(r.Cache) {
		add(invalid("run.cache", "%q: write an absolute directory, like \"/var/cache/crackbox\"", r.Cache))
	}
	if !slices.Contains(Levels, c.Log.Level) {
		add(invalid("log.level", "%q: use one of %s", c.Log.Level, strings.Join(Levels, ", ")))
	}
	return errors.Join(errs...)
}

// checkListen accepts "" (disabled) or host:port with a numeric port.
func checkListen(key, addr string) error {
	if addr == "" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return invalid(key, "%q: write host:port like \"127.0.0.1:3128\" or \":3128\", or \"\" to disable", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return invalid(key, "%q: port must be a number 0-65535", addr)
	}
	if strings.ContainsAny(host, " /") {
		return invalid(key, "%q: bad host part", addr)
	}
	return nil
}

func normResolver(s string) (string, error) {
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 53).String(), nil
	}
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return "", errors.New("not an IP or IP:port")
	}
	return ap.String(), nil
}
