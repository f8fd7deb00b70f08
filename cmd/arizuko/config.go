package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
	// --token/$ARIZUKO_TOKEN ("" for the token file); adapterSecret is the
	// session's, see session.
	remote, token, adapterSecret string
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
		Log:     Log{Level: "info"},
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

// The environment arizuko reads; the secrets variables are named in
// pkg/secrets, whose messages mention them.
const (
	envConfig          = "ARIZUKO_CONFIG"
	envData            = "ARIZUKO_DATA"
	envServer          = "ARIZUKO_SERVER"
	envToken           = "ARIZUKO_TOKEN"
	envObserveMessages = "ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES"
	envObserveChars    = "ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS"
	envAdapterSecret   = "ARIZUKO_ADAPTER_SECRET"
)

// arizukoTable is arizuko's half of the one settings registry: the keys of
// Config (arizuko.toml) and of session, and the variables that set them.
// Unlike crackbox, only these keys have a variable.
var arizukoTable = &config.Table{
	Binary:    "arizuko",
	Example:   "arizuko.toml.example",
	Prefix:    "ARIZUKO_",
	ConfigEnv: envConfig,
	Env: map[string][]string{
		"data_dir":                      {envData},
		"store.url":                     {envStore},
		"secrets.key_file":              {secrets.EnvKeyFile},
		"turns.observe_window_messages": {envObserveMessages},
		"turns.observe_window_chars":    {envObserveChars},
		"server":                        {envServer},
		"token":                         {envToken},
		"secrets_key":                   {secrets.EnvKey},
		"adapter_secret":                {envAdapterSecret},
	},
	// What arizuko sets for a turn's agent, which may run arizuko itself.
	Other: []string{"ARIZUKO_FOLDER", "ARIZUKO_TOPIC", "ARIZUKO_TURN",
		"ARIZUKO_SESSION", "ARIZUKO_CHAT", "ARIZUKO_MCP_SOCKET"},
	Renamed: map[string]string{
		"OBSERVE_WINDOW_MESSAGES": envObserveMessages,
		"OBSERVE_WINDOW_CHARS":    envObserveChars,
	},
	EnvHint: "arizuko reads ARIZUKO_CONFIG, ARIZUKO_DATA, ARIZUKO_STORE, ARIZUKO_SERVER, ARIZUKO_TOKEN, ARIZUKO_SECRETS_KEY[_FILE] and ARIZUKO_TURNS_OBSERVE_WINDOW_*, see arizuko.toml.example",
}

// session holds the settings no file may hold: the daemon a command talks
// to, its token, and the key ring's key itself.
type session struct {
	Server     string `toml:"server"`      // --server, $ARIZUKO_SERVER
	Token      string `toml:"token"`       // --token, $ARIZUKO_TOKEN
	SecretsKey string `toml:"secrets_key"` // $ARIZUKO_SECRETS_KEY, over every key file
	// AdapterSecret is what `arizuko adapter` signs with: --secret, $ARIZUKO_ADAPTER_SECRET.
	AdapterSecret string `toml:"adapter_secret"`
}

// loadSession resolves the session settings alone, for commands that read no
// config file.
func loadSession(lookup func(string) (string, bool), flags ...config.Override) (session, error) {
	var s session
	err := arizukoTable.Resolve(&s, config.Source{LookupEnv: lookup, Overrides: flags})
	return s, err
}

// rootFlags are the root's flags that set keys. An empty flag leaves the
// setting to the environment and the file.
func (a *app) rootFlags() []config.Override {
	return flagOverrides(map[string]string{"data_dir": a.data, "store.url": a.store, "server": a.server, "token": a.token})
}

// flagOverrides turns flag values into overrides of their keys, leaving out
// flags not given.
func flagOverrides(flags map[string]string) []config.Override {
	var out []config.Override
	for key, v := range flags {
		if v != "" {
			out = append(out, config.Override{Key: key, Value: v})
		}
	}
	return out
}

// loadConfig is the CLI's config: the root flags, and a command's own flags
// that set keys (serve --listen), over the process environment.
func (a *app) loadConfig(flags ...config.Override) (*Config, error) {
	return loadConfig(a, os.LookupEnv, flags...)
}

// loadConfig resolves every setting once through arizukoTable, flags over
// environment over file over defaults. The file is --config, then
// $ARIZUKO_CONFIG, then <data>/arizuko.toml when it exists.
func loadConfig(a *app, lookup func(string) (string, bool), flags ...config.Override) (*Config, error) {
	src := config.Source{Path: a.config, LookupEnv: lookup, Overrides: append(a.rootFlags(), flags...)}
	var fileKeys, sessionKeys []config.Override
	inSession := arizukoTable.Keys(&session{})
	for _, o := range src.Overrides {
		if slices.Contains(inSession, o.Key) {
			sessionKeys = append(sessionKeys, o)
		} else {
			fileKeys = append(fileKeys, o)
		}
	}
	src.Overrides = fileKeys
	getenv := func(k string) string { v, _ := lookup(k); return v }
	data, _ := arizukoTable.Preset("data_dir", src)
	if data == "" {
		data = defaultDataDir(getenv)
	}
	c := defaultConfig()
	file, err := arizukoTable.Load(c, src, []string{filepath.Join(data, "arizuko.toml")})
	if err != nil {
		return nil, err
	}
	c.file = file
	s, err := loadSession(lookup, sessionKeys...)
	if err != nil {
		return nil, err
	}
	c.remote, c.token, c.Secrets.key, c.adapterSecret = s.Server, s.Token, s.SecretsKey, s.AdapterSecret
	c.Secrets.fromEnv = s.SecretsKey != "" || arizukoTable.FromEnv("secrets.key_file", src)
	if c.DataDir == "" {
		c.DataDir = defaultDataDir(getenv)
	}
	if err := c.validate(); err != nil {
		if file != "" {
			return nil, fmt.Errorf("config (file %s): %w", file, err)
		}
		return nil, fmt.Errorf("config: %w", err)
	}
	if c.Server.TokenFile == "" {
		c.Server.TokenFile = filepath.Join(c.DataDir, "token")
	}
	if c.Secrets.KeyFile == "" {
		c.Secrets.KeyFile = filepath.Join(c.DataDir, "secrets.key")
	}
	return c, nil
}

// validate checks what the types alone do not, all problems together.
func (c *Config) validate() error {
	var errs []error
	if ttl := c.Routing.EngagementTTL.Duration; ttl < 0 || ttl > 30*24*time.Hour {
		errs = append(errs, fmt.Errorf("routing.engagement_ttl %s: want 0 to 720h", ttl))
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"folders", c.Limits.Folders}, {"routes", c.Limits.Routes}, {"grants", c.Limits.Grants},
		{"observe", c.Limits.Observe}, {"messages_per_minute", c.Limits.MessagesPerMinute},
		{"hooks", c.Limits.Hooks}, {"schedules", c.Limits.Schedules}} {
		if k.v < 0 {
			errs = append(errs, fmt.Errorf("limits.%s %d: want 0 (no limit) or more", k.key, k.v))
		}
	}
	for _, k := range []struct {
		key string
		v   int
	}{{"observe_window_messages", c.Turns.ObserveWindowMessages}, {"observe_window_chars", c.Turns.ObserveWindowChars}} {
		if k.v < 0 {
			errs = append(errs, fmt.Errorf("turns.%s %d: want a positive whole number, or 0 for the default", k.key, k.v))
		}
	}
	errs = append(errs, c.proxyOptions(), c.Turns.validate())
	return errors.Join(errs...)
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
