// Package netjail sets up the per-run network of a jailed guest in
// privileged mode: a /30 from an address pool, a tap device whose host side
// carries the run's proxy and DNS address, and an nftables table that lets
// the guest reach nothing but those. Every object carries the prefix "cbx"
// and its owner's pid, so GC removes the leftovers of crashed runs and never
// those of live ones. Jail composes it all with jail.Run for one command:
// crackbox run and arizuko's turns both go through it.
package netjail

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
)

// Ports the guest dials on the host side address. Host services bind
// elsewhere (see Listeners), so these stay fixed whatever the host runs.
const (
	DefaultProxyPort = 3128
	DNSPort          = 53
)

// Listeners are the ports the run's own services are bound to on the host
// side address. The guest never dials them: prerouting rewrites its
// connections to the ports it does dial onto these, so a wildcard listener on
// :3128 or :53 (squid, dnsmasq, a proxy daemon, or a local user on purpose)
// cannot collide with a run.
type Listeners struct {
	Proxy       uint16 // forward proxy; 0 = the guest's ProxyPort
	Transparent uint16 // transparent proxy, reached only through the 80/443 rewrite; required
	DNSUDP      uint16 // 0 = the guest's DNSPort
	DNSTCP      uint16 // 0 = the guest's DNSPort
}

// withDefaults fills zero ports with the guest's ports (no rewrite needed).
func (l Listeners) withDefaults(proxyPort, dnsPort uint16) Listeners {
	l.Proxy = orDefault(l.Proxy, proxyPort)
	l.DNSUDP = orDefault(l.DNSUDP, dnsPort)
	l.DNSTCP = orDefault(l.DNSTCP, dnsPort)
	return l
}

// ErrNotPermitted means the caller lacks CAP_NET_ADMIN or /dev/net/tun; the
// run should fall back to proxy-only mode.
var ErrNotPermitted = errors.New("netjail: tap networking needs CAP_NET_ADMIN and /dev/net/tun")

// Config describes one run's network.
type Config struct {
	RunID   string       // unique per run: letters, digits, '.', '_', '-'; at most 64 characters
	RunsDir string       // claims live in RunsDir/.netjail
	Pool    netip.Prefix // zero = DefaultPool
	// UID and GID own the tap so an unprivileged QEMU can attach to it; -1
	// means root (then only root or CAP_NET_ADMIN may attach).
	UID, GID  int
	ProxyPort uint16 // the port the guest dials for the proxy; 0 = DefaultProxyPort
	// Serve starts the run's services on n.Host once the tap carries that
	// address and before the table is installed, and returns where they
	// listen. Nil means services on the guest's ports (Transparent on 3129),
	// started by the caller.
	Serve func(n *Net) (Listeners, error)
	Log   *slog.Logger // nil discards
}

// Net is one run's live network. Close removes it.
type Net struct {
	RunID  string
	Tap    string
	Table  string
	Subnet netip.Prefix
	Host   netip.Addr // host side: proxy and DNS listen here; the guest's gateway
	Guest  netip.Addr

	ProxyPort uint16    // what the guest dials for the forward proxy
	DNSPort   uint16    // what the guest dials for DNS
	Listen    Listeners // where the services listen on Host

	claim *claim
	log   *slog.Logger
	once  sync.Once
	err   error
}

// GuestCIDR is the guest's address with its prefix, e.g. 10.213.0.2/30.
func (n *Net) GuestCIDR() string { return netip.PrefixFrom(n.Guest, n.Subnet.Bits()).String() }

// ProxyAddr is host:port the guest dials for the forward proxy.
func (n *Net) ProxyAddr() string { return hostPort(n.Host, n.ProxyPort) }

// DNSAddr is host:port the guest dials for DNS.
func (n *Net) DNSAddr() string { return hostPort(n.Host, n.DNSPort) }

// ProxyURL is what the guest exports as HTTP_PROXY.
func (n *Net) ProxyURL() string { return "http://" + n.ProxyAddr() }

func hostPort(a netip.Addr, p uint16) string { return netip.AddrPortFrom(a, p).String() }

// Available reports nil if this process can build tap networks, or an error
// wrapping ErrNotPermitted saying what is missing.
func Available() error {
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		return fmt.Errorf("%w: /dev/net/tun: %v", ErrNotPermitted, err)
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fmt.Errorf("%w: read capabilities: %v", ErrNotPermitted, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				break
			}
			const capNetAdmin = 12
			if caps&(1<<capNetAdmin) == 0 {
				return fmt.Errorf("%w: this process has no CAP_NET_ADMIN (run as root, or use --net proxy-only)", ErrNotPermitted)
			}
			return nil
		}
	}
	return fmt.Errorf("%w: no CapEff line in /proc/self/status", ErrNotPermitted)
}

func validRunID(id string) error {
	if id == "" || len(id) > 64 {
		return fmt.Errorf("netjail: run id %q: want 1..64 characters", id)
	}
	for _, r := range id {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-'
		if !ok {
			return fmt.Errorf("netjail: run id %q: only letters, digits, '.', '_' and '-' are allowed", id)
		}
	}
	return nil
}

// Setup claims a /30, creates the tap and installs the table. On error
// everything it made is removed again.
func Setup(ctx context.Context, cfg Config) (_ *Net, err error) {
	if err := validRunID(cfg.RunID); err != nil {
		return nil, err
	}
	if cfg.RunsDir == "" {
		return nil, errors.New("netjail: Config.RunsDir is required (claims of /30s live there)")
	}
	pool, err := validatePool(cfg.Pool)
	if err != nil {
		return nil, err
	}
	if err := Available(); err != nil {
		return nil, err
	}
	log := cfg.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	me, err := self(cfg.RunID)
	if err != nil {
		return nil, err
	}
	n := &Net{
		RunID:     cfg.RunID,
		Tap:       TapName(cfg.RunID),
		Table:     TableName(cfg.RunID),
		ProxyPort: orDefault(cfg.ProxyPort, DefaultProxyPort),
		DNSPort:   DNSPort,
		log:       log,
	}
	busy, err := hostPrefixes()
	if err != nil {
		return nil, err
	}
	n.claim, err = claimSubnet(cfg.RunsDir, pool, busy, record{owner: me, Tap: n.Tap, Table: n.Table})
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = n.Close()
		}
	}()
	n.Subnet = n.claim.subnet
	n.Host = n.Subnet.Addr().Next()
	n.Guest = n.Host.Next()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := createTap(n.Tap, netip.PrefixFrom(n.Host, 30), cfg.UID, cfg.GID, me.tag()); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.Listen = Listeners{Transparent: legacyTransparentPort}
	if cfg.Serve != nil {
		if n.Listen, err = cfg.Serve(n); err != nil {
			return nil, err
		}
	}
	n.Listen = n.Listen.withDefaults(n.ProxyPort, n.DNSPort)
	rules := Rules{
		Table: n.Table, Iface: n.Tap, Host: n.Host, Guest: n.Guest,
		ProxyPort: n.ProxyPort, DNSPort: n.DNSPort, Listen: n.Listen,
		Owner: me.tag(),
	}
	if err := rules.Install(); err != nil {
		return nil, err
	}
	log.Debug("netjail up", "run", n.RunID, "tap", n.Tap, "table", n.Table, "subnet", n.Subnet)
	return n, nil
}

// legacyTransparentPort is where the transparent listener is expected when
// Config.Serve is nil.
const legacyTransparentPort = 3129

func orDefault(v, d uint16) uint16 {
	if v == 0 {
		return d
	}
	return v
}

// Close removes the table and the tap, then releases the /30. It is safe to
// call more than once and from several goroutines.
func (n *Net) Close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() {
		err := removeObjects(n.Tap, n.Table)
		if err == nil {
			// Keep the claim while objects remain, so the /30 is not handed
			// out again until GC has removed them.
			err = n.claim.release()
		} else if n.claim != nil && n.claim.f != nil {
			n.claim.f.Close()
		}
		n.err = err
		if n.log != nil {
			n.log.Debug("netjail down", "run", n.RunID, "err", err)
		}
	})
	return n.err
}

// removeObjects deletes a run's table and tap; missing ones are fine.
func removeObjects(tap, table string) error {
	return errors.Join(RemoveTable(table), deleteLink(tap))
}
