package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/router"
)

// Config is arizuko.toml.
type Config struct {
	DataDir string      `toml:"data_dir"`
	Server  Server      `toml:"server"`
	Secrets Secrets     `toml:"secrets"`
	Routing Routing     `toml:"routing"`
	Log     Log         `toml:"log"`
	Turns   TurnsConfig `toml:"turns"`
	// Proxy holds the keys of crackbox's [proxy] that shape every turn's
	// private egress proxy: resolver, hosts, allow_cidrs, default_ports and
	// the timeouts. What a guest may reach is each folder's network rules.
	Proxy config.Proxy `toml:"proxy"`

	file string
}

// Server configures the HTTP API.
type Server struct {
	Listen    string `toml:"listen"`     // host:port
	TokenFile string `toml:"token_file"` // "" is <data>/token
}

// Secrets configures the key ring.
type Secrets struct {
	KeyFile string `toml:"key_file"` // "" is <data>/secrets.key; $ARIZUKO_SECRETS_KEY wins
}

// Routing configures the resolver.
type Routing struct {
	EngagementTTL config.Duration `toml:"engagement_ttl"`
}

// Log configures the daemon's logger.
type Log struct {
	Level string `toml:"level"`
}

const defaultListen = "127.0.0.1:7480"

func defaultConfig() *Config {
	p := config.Default().Proxy
	p.Listen, p.Transparent = "", ""
	return &Config{
		Proxy:   p,
		Server:  Server{Listen: defaultListen},
		Routing: Routing{EngagementTTL: config.Duration{Duration: router.DefaultEngagementTTL}},
	}
}

// defaultDataDir follows the XDG spec, or /var/lib/arizuko for root.
func defaultDataDir() string {
	if os.Geteuid() == 0 {
		return "/var/lib/arizuko"
	}
	if x := os.Getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "arizuko")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "arizuko-data"
	}
	return filepath.Join(home, ".local", "share", "arizuko")
}

// loadConfig resolves the data dir and reads the config file: --config, then
// $ARIZUKO_CONFIG, then <data>/arizuko.toml when it exists.
func loadConfig() (*Config, error) {
	c := defaultConfig()
	path := firstNonEmpty(flagConfig, os.Getenv("ARIZUKO_CONFIG"))
	explicit := path != ""
	data := firstNonEmpty(flagData, os.Getenv("ARIZUKO_DATA"))
	if !explicit {
		d := firstNonEmpty(data, defaultDataDir())
		path = filepath.Join(d, "arizuko.toml")
	}
	err := config.DecodeFile(path, c)
	switch {
	case err == nil:
		c.file = path
	case errors.Is(err, fs.ErrNotExist) && !explicit:
	default:
		return nil, err
	}
	c.DataDir = firstNonEmpty(data, c.DataDir, defaultDataDir())
	if c.Routing.EngagementTTL.Duration < 0 || c.Routing.EngagementTTL.Duration > 30*24*time.Hour {
		return nil, fmt.Errorf("%s: routing.engagement_ttl %s: want 0 to 720h", path, c.Routing.EngagementTTL.Duration)
	}
	if err := c.proxyOptions(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c.Server.TokenFile == "" {
		c.Server.TokenFile = filepath.Join(c.DataDir, "token")
	}
	if c.Secrets.KeyFile == "" {
		c.Secrets.KeyFile = filepath.Join(c.DataDir, "secrets.key")
	}
	return c, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// proxyOptions checks [proxy] with crackbox's own validation and builds the
// turns' proxy options with crackbox's one builder. Keys that only a
// standalone proxy has are refused rather than ignored.
func (c *Config) proxyOptions() error {
	p := c.Proxy
	for _, k := range []struct{ key, val string }{{"listen", p.Listen}, {"transparent", p.Transparent},
		{"decision_log", p.DecisionLog}, {"state_file", p.StateFile}, {"client", p.Client},
		{"registry", p.Registry}, {"replica", p.Replica}} {
		if k.val != "" {
			return fmt.Errorf("proxy.%s: turns run a private proxy per guest, so this key does nothing here; remove it", k.key)
		}
	}
	if len(p.Allow) > 0 {
		return errors.New("proxy.allow: what a turn's guest may reach is its folder's network rules; use `arizuko network allow FOLDER HOST`")
	}
	cc := config.Default()
	cc.Proxy = p
	if err := cc.Validate(); err != nil {
		return err
	}
	opts, err := cc.Proxy.RunOptions(nil)
	if err != nil {
		return err
	}
	c.Turns.proxy = opts
	return nil
}
