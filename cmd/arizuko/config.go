package main

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/crackbox/crackbox/pkg/arizuko/email"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/config"
	"github.com/crackbox/crackbox/pkg/router"
	"github.com/crackbox/crackbox/pkg/secrets"
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
	Store StoreConfig  `toml:"store"`
	Fleet FleetConfig  `toml:"fleet"`
	// Limits bound each tenant's folders, routes, grants, observe edges
	// and messages per minute.
	Limits service.Limits `toml:"limits"`
	// Email is the email channel `arizuko serve` runs when enabled.
	Email email.Config `toml:"email"`

	file string
	// remote and token pick a daemon to talk to: --server/$ARIZUKO_SERVER and
	// --token/$ARIZUKO_TOKEN ("" for the token file).
	remote, token string
}

// Server configures the HTTP API.
type Server struct {
	Listen    string `toml:"listen"`     // host:port
	TokenFile string `toml:"token_file"` // "" is <data>/token
}

// Secrets configures the key ring.
type Secrets struct {
	KeyFile string `toml:"key_file"` // "" is <data>/secrets.key; $ARIZUKO_SECRETS_KEY_FILE wins

	key     string // $ARIZUKO_SECRETS_KEY, which wins over every file
	fromEnv bool   // the key or its file came from the environment
}

// ring opens the key ring the secrets settings name.
func (s Secrets) ring() (*secrets.Ring, error) { return secrets.Load(s.key, s.KeyFile, slog.Default()) }

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
		Limits:  service.DefaultLimits,
		Routing: Routing{EngagementTTL: config.Duration{Duration: router.DefaultEngagementTTL}},
	}
}

// defaultDataDir follows the XDG spec, or /var/lib/arizuko for root.
func defaultDataDir(getenv func(string) string) string {
	if os.Geteuid() == 0 {
		return "/var/lib/arizuko"
	}
	if x := getenv("XDG_DATA_HOME"); x != "" {
		return filepath.Join(x, "arizuko")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "arizuko-data"
	}
	return filepath.Join(home, ".local", "share", "arizuko")
}

// The environment arizuko reads, all in loadConfig; the secrets variables
// are named in pkg/secrets, whose messages mention them.
const (
	envConfig          = "ARIZUKO_CONFIG"
	envData            = "ARIZUKO_DATA"
	envServer          = "ARIZUKO_SERVER"
	envToken           = "ARIZUKO_TOKEN"
	envObserveMessages = "ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES"
	envObserveChars    = "ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS"
)

// renamedEnv are variables arizuko no longer reads, with their new names.
// Setting one is an error rather than an alias: an un-prefixed name may be
// meant for another program, and two names for one setting drift apart.
var renamedEnv = map[string]string{
	"OBSERVE_WINDOW_MESSAGES": envObserveMessages,
	"OBSERVE_WINDOW_CHARS":    envObserveChars,
}

// loadConfig is the CLI's config: the root flags over the process environment.
func (a *app) loadConfig() (*Config, error) { return loadConfig(a, os.Getenv) }

// loadConfig resolves every setting once, flags over environment over file
// over defaults. The file is --config, then $ARIZUKO_CONFIG, then
// <data>/arizuko.toml when it exists.
func loadConfig(flags *app, getenv func(string) string) (*Config, error) {
	for old, name := range renamedEnv {
		if getenv(old) != "" {
			return nil, fmt.Errorf("$%s is no longer read: rename it to $%s", old, name)
		}
	}
	c := defaultConfig()
	path := firstNonEmpty(flags.config, getenv(envConfig))
	explicit := path != ""
	data := firstNonEmpty(flags.data, getenv(envData))
	if !explicit {
		d := firstNonEmpty(data, defaultDataDir(getenv))
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
	c.DataDir = firstNonEmpty(data, c.DataDir, defaultDataDir(getenv))
	c.Store.URL = firstNonEmpty(flags.store, getenv(envStore), c.Store.URL)
	if c.Routing.EngagementTTL.Duration < 0 || c.Routing.EngagementTTL.Duration > 30*24*time.Hour {
		return nil, fmt.Errorf("%s: routing.engagement_ttl %s: want 0 to 720h", path, c.Routing.EngagementTTL.Duration)
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"folders", c.Limits.Folders}, {"routes", c.Limits.Routes}, {"grants", c.Limits.Grants},
		{"observe", c.Limits.Observe}, {"messages_per_minute", c.Limits.MessagesPerMinute},
		{"hooks", c.Limits.Hooks}, {"schedules", c.Limits.Schedules}} {
		if k.v < 0 {
			return nil, fmt.Errorf("%s: limits.%s %d: want 0 (no limit) or more", path, k.key, k.v)
		}
	}
	if err := c.proxyOptions(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if err := c.applyEnv(getenv); err != nil {
		return nil, err
	}
	if err := c.Turns.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.remote = firstNonEmpty(flags.server, getenv(envServer))
	c.token = firstNonEmpty(flags.token, getenv(envToken))
	if c.Server.TokenFile == "" {
		c.Server.TokenFile = filepath.Join(c.DataDir, "token")
	}
	if c.Secrets.KeyFile == "" {
		c.Secrets.KeyFile = filepath.Join(c.DataDir, "secrets.key")
	}
	return c, nil
}

// applyEnv sets what the environment overrides in the file's settings.
func (c *Config) applyEnv(getenv func(string) string) error {
	for _, v := range []struct {
		name string
		dst  *int
	}{{envObserveMessages, &c.Turns.ObserveWindowMessages}, {envObserveChars, &c.Turns.ObserveWindowChars}} {
		s := getenv(v.name)
		if s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("$%s %q: want a positive whole number", v.name, s)
		}
		*v.dst = n
	}
	if k := getenv(secrets.EnvKey); k != "" {
		c.Secrets.key, c.Secrets.fromEnv = k, true
	}
	if f := getenv(secrets.EnvKeyFile); f != "" {
		c.Secrets.KeyFile, c.Secrets.fromEnv = f, true
	}
	return nil
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
