package config

import (
	"log/slog"
	"time"

	"github.com/crackbox/crackbox/internal/logsetup"
	"github.com/crackbox/crackbox/pkg/jail"
)

// Config is every key crackbox reads. The toml tags are the file's key names;
// the same dotted names ("proxy.listen") are used by Set and in error messages.
type Config struct {
	Proxy Proxy `toml:"proxy"`
	Admin Admin `toml:"admin"`
	Run   Run   `toml:"run"`
	Log   Log   `toml:"log"`

	// File is the config file that was loaded, empty when none was found.
	File string `toml:"-"`
}

// Proxy configures the egress proxy, both standalone and inside crackbox run.
type Proxy struct {
	Listen       string              `toml:"listen"`        // forward (CONNECT/HTTP) listener; "" disables
	Transparent  string              `toml:"transparent"`   // transparent (SNI/Host) listener; "" disables
	Allow        []string            `toml:"allow"`         // global allowlist
	AllowCIDRs   []string            `toml:"allow_cidrs"`   // private ranges upstreams may resolve into
	DefaultPorts []int               `toml:"default_ports"` // ports allowed for entries without a port
	Resolver     string              `toml:"resolver"`      // DNS server ip[:port]; "" uses the system resolver
	Hosts        map[string][]string `toml:"hosts"`         // static name -> addresses, checked before DNS
	DialTimeout  Duration            `toml:"dial_timeout"`
	IdleTimeout  Duration            `toml:"idle_timeout"`
	// HeaderTimeout bounds a request's line and headers (or a TLS ClientHello)
	// from its first byte; MaxClientConns the connections one client address
	// may hold open.
	HeaderTimeout  Duration `toml:"header_timeout"`
	MaxClientConns int      `toml:"max_client_conns"`
	DecisionLog    string   `toml:"decision_log"` // JSON lines path; "-" is stderr; "" is off
	StateFile      string   `toml:"state_file"`   // registry persistence; "" is off
	DrainGrace     Duration `toml:"drain_grace"`  // how long shutdown waits for open tunnels
	Client         string   `toml:"client"`       // single-client mode: the one client IP
	// UpstreamCA is a PEM file of CAs trusted, besides the system roots, for
	// upstreams whose TLS the proxy terminates to inject a secret.
	UpstreamCA string `toml:"upstream_ca"`
	// StateKeyFile holds the key that seals client secrets in state_file
	// when $CRACKBOX_STATE_KEY is unset.
	StateKeyFile string `toml:"state_key_file"`
	// Registry is the NATS URL list of a registry shared by proxy replicas;
	// "" keeps the registry in this process (and proxy.state_file).
	Registry      string `toml:"registry"`
	RegistryCreds string `toml:"registry_creds"` // NATS JWT credentials file (.creds)
	RegistryNKey  string `toml:"registry_nkey"`  // NATS nkey seed file
	RegistryCA    string `toml:"registry_ca"`    // PEM CAs for the NATS servers' TLS
	// RegistryInsecure lets the registry's NATS go without credentials or
	// TLS (--insecure-nats): anyone who reaches it could widen egress.
	RegistryInsecure bool `toml:"registry_insecure"`
	// RegistrySignKey is the nkey seed file the admin API signs registry
	// values with; a replica without it cannot edit the shared registry.
	RegistrySignKey string `toml:"registry_sign_key"`
	// RegistrySigners are the public nkeys whose values a replica enforces,
	// besides its own RegistrySignKey's.
	RegistrySigners []string `toml:"registry_signers"`
	Replica         string   `toml:"replica"` // this replica's name in logs; "" is the host name
}

// Admin configures the proxy daemon's HTTP admin API.
type Admin struct {
	Listen string `toml:"listen"` // "" disables the admin API
	Secret string `toml:"secret"` // bearer token; without it admin must be loopback
	// MetricsListen serves GET /metrics and /health without the secret; "" = off.
	MetricsListen string `toml:"metrics_listen"`
}

// Run configures the guest that crackbox run starts.
type Run struct {
	Kernel    string   `toml:"kernel"`     // guest kernel path; "" uses the built one
	Accel     string   `toml:"accel"`      // auto, kvm or tcg
	Memory    Size     `toml:"memory"`     // guest RAM
	CPUs      int      `toml:"cpus"`       // guest vCPUs
	Timeout   Duration `toml:"timeout"`    // wall-clock limit; 0 is none
	Net       string   `toml:"net"`        // guest network mode, see NetModes
	AddrPool  string   `toml:"addr_pool"`  // IPv4 range guest links are carved from
	GuestInit string   `toml:"guest_init"` // guest-init binary path; "" uses the built one
	Snapshot  string   `toml:"snapshot"`   // restore from a snapshot: auto, on or off
	// WorkdirSync is when the workdir's changes reach the host: exit (the default) or
	// live.
	WorkdirSync string `toml:"workdir_sync"`
	Cache       string `toml:"cache"` // kernels, initramfs images, snapshots; "" = install.CacheDir()
	// Secret lists credentials the proxy injects ([[run.secret]]); the guest
	// sees only placeholders. Set in the file only.
	Secret []RunSecret `toml:"secret"`
}

// RunSecret is one [[run.secret]] table: the value of Name (or of From:
// "env:OTHER", "file:PATH") is sent only to Hosts.
type RunSecret struct {
	Name  string   `toml:"name"`
	Hosts []string `toml:"hosts"`
	From  string   `toml:"from"`
}

// Log configures the process logger.
type Log struct {
	Level string `toml:"level"` // debug, info, warn or error
}

// Accels and NetModes are the accepted values of run.accel and run.net.
var (
	Accels   = []string{"auto", "kvm", "tcg"}
	NetModes = []string{"auto", jail.NetTap, jail.NetProxyOnly, jail.NetNone, jail.NetProxyOnlyAlias}
	Levels   = logsetup.Levels
)

// Snapshots are the accepted values of run.snapshot.
var Snapshots = []string{"auto", "on", "off"}

// WorkdirSyncs are the accepted values of run.workdir_sync.
var WorkdirSyncs = []string{jail.WorkdirSyncLive, jail.WorkdirSyncExit}

// Default returns the configuration used when no file, env or flag says otherwise.
func Default() *Config {
	return &Config{
		Proxy: Proxy{
			Listen:         ":3128",
			Transparent:    ":3127",
			Allow:          []string{},
			AllowCIDRs:     []string{},
			DefaultPorts:   []int{80, 443},
			Hosts:          map[string][]string{},
			DialTimeout:    Duration{10 * time.Second},
			IdleTimeout:    Duration{5 * time.Minute},
			HeaderTimeout:  Duration{30 * time.Second},
			MaxClientConns: 512,
			DrainGrace:     Duration{30 * time.Second},
		},
		Admin: Admin{Listen: "127.0.0.1:3129"},
		Run: Run{
			Accel:       "auto",
			Memory:      512 << 20,
			CPUs:        1,
			Net:         "auto",
			AddrPool:    "10.213.0.0/16",
			Snapshot:    "auto",
			WorkdirSync: jail.WorkdirSyncExit,
		},
		Log: Log{Level: "info"},
	}
}

// SlogLevel maps log.level to a slog level; Validate has already rejected others.
func (l Log) SlogLevel() slog.Level {
	lv, err := logsetup.ParseLevel(l.Level)
	if err != nil {
		return slog.LevelInfo
	}
	return lv
}
