package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/secrets"
)

// loadWith runs the loader on flags and an environment given as a map.
func loadWith(flags *app, env map[string]string) (*Config, error) {
	return loadConfig(flags, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
}

// Every setting arizuko resolves, pinned as an operator sees it: the file
// alone, the environment over the file, a flag over the environment, and the
// default when nothing sets it.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o700)
	file := filepath.Join(dir, "file.toml")
	other := filepath.Join(dir, "other.toml")
	inData := filepath.Join(data, "arizuko.toml")
	full := `data_dir = "/file/data"
[store]
url = "postgres://file/db"
[server]
listen = "127.0.0.1:1111"
token_file = "/file/token"
[secrets]
key_file = "/file/secrets.key"
[turns]
observe_window_messages = 7
observe_window_chars = 900
[fleet]
nats = "nats://file:4222"
creds = "/file/creds"
[limits]
folders = 3
[routing]
engagement_ttl = "5m"
`
	for path, body := range map[string]string{file: full, other: "[limits]\nfolders = 9\n", inData: "[limits]\nfolders = 11\n"} {
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	get := map[string]func(*Config) string{
		"file":         func(c *Config) string { return c.file },
		"data_dir":     func(c *Config) string { return c.DataDir },
		"store.url":    func(c *Config) string { return c.Store.URL },
		"remote":       func(c *Config) string { return c.remote },
		"token":        func(c *Config) string { return c.token },
		"key":          func(c *Config) string { return fmt.Sprintf("%s %v", c.Secrets.key, c.Secrets.fromEnv) },
		"key_file":     func(c *Config) string { return fmt.Sprintf("%s %v", c.Secrets.KeyFile, c.Secrets.fromEnv) },
		"token_file":   func(c *Config) string { return c.Server.TokenFile },
		"listen":       func(c *Config) string { return c.Server.Listen },
		"obs_msgs":     func(c *Config) string { return fmt.Sprint(c.Turns.ObserveWindowMessages) },
		"obs_chars":    func(c *Config) string { return fmt.Sprint(c.Turns.ObserveWindowChars) },
		"folders":      func(c *Config) string { return fmt.Sprint(c.Limits.Folders) },
		"nats":         func(c *Config) string { return c.Fleet.NATS },
		"ttl":          func(c *Config) string { return c.Routing.EngagementTTL.String() },
		"dial":         func(c *Config) string { return c.Proxy.DialTimeout.String() },
		"proxy.listen": func(c *Config) string { return c.Proxy.Listen },
	}
	cases := []struct {
		name  string
		flags app
		env   map[string]string
		what  string
		want  string
	}{
		// The file itself: --config, then $ARIZUKO_CONFIG, then <data>/arizuko.toml.
		{"config from data dir", app{data: data}, nil, "file", inData},
		{"config from env", app{data: data}, map[string]string{envConfig: other}, "file", other},
		{"config flag over env", app{data: data, config: file}, map[string]string{envConfig: other}, "file", file},
		{"config from env data dir", app{}, map[string]string{envData: data}, "file", inData},
		{"no config file", app{data: dir}, nil, "file", ""},

		{"data_dir default", app{config: other}, nil, "data_dir", "/var/lib/arizuko"},
		{"data_dir file", app{config: file}, nil, "data_dir", "/file/data"},
		{"data_dir env over file", app{config: file}, map[string]string{envData: "/env/data"}, "data_dir", "/env/data"},
		{"data_dir flag over env", app{config: file, data: "/flag/data"}, map[string]string{envData: "/env/data"}, "data_dir", "/flag/data"},

		{"store.url default", app{config: other}, nil, "store.url", ""},
		{"store.url file", app{config: file}, nil, "store.url", "postgres://file/db"},
		{"store.url env over file", app{config: file}, map[string]string{envStore: "postgres://env/db"}, "store.url", "postgres://env/db"},
		{"store.url flag over env", app{config: file, store: "postgres://flag/db"}, map[string]string{envStore: "postgres://env/db"}, "store.url", "postgres://flag/db"},

		{"server default", app{config: file}, nil, "remote", ""},
		{"server env", app{config: file}, map[string]string{envServer: "http://env:1"}, "remote", "http://env:1"},
		{"server flag over env", app{config: file, server: "http://flag:2"}, map[string]string{envServer: "http://env:1"}, "remote", "http://flag:2"},
		{"token default", app{config: file}, nil, "token", ""},
		{"token env", app{config: file}, map[string]string{envToken: "env-token"}, "token", "env-token"},
		{"token flag over env", app{config: file, token: "flag-token"}, map[string]string{envToken: "env-token"}, "token", "flag-token"},

		{"secrets key default", app{config: file}, nil, "key", " false"},
		{"secrets key env", app{config: file}, map[string]string{secrets.EnvKey: "k1,k2"}, "key", "k1,k2 true"},
		{"key_file default", app{config: other, data: "/d"}, nil, "key_file", "/d/secrets.key false"},
		{"key_file file", app{config: file}, nil, "key_file", "/file/secrets.key false"},
		{"key_file env over file", app{config: file}, map[string]string{secrets.EnvKeyFile: "/env/key"}, "key_file", "/env/key true"},

		{"token_file default", app{config: other, data: "/d"}, nil, "token_file", "/d/token"},
		{"token_file file", app{config: file}, nil, "token_file", "/file/token"},
		{"listen default", app{config: other}, nil, "listen", defaultListen},
		{"listen file", app{config: file}, nil, "listen", "127.0.0.1:1111"},

		{"observe messages default", app{config: other}, nil, "obs_msgs", "0"},
		{"observe messages file", app{config: file}, nil, "obs_msgs", "7"},
		{"observe messages env over file", app{config: file}, map[string]string{envObserveMessages: "12"}, "obs_msgs", "12"},
		{"observe chars default", app{config: other}, nil, "obs_chars", "0"},
		{"observe chars file", app{config: file}, nil, "obs_chars", "900"},
		{"observe chars env over file", app{config: file}, map[string]string{envObserveChars: "1234"}, "obs_chars", "1234"},

		{"limits default", app{data: dir}, nil, "folders", "500"},
		{"limits file", app{config: other}, nil, "folders", "9"},
		{"fleet.nats file", app{config: file}, nil, "nats", "nats://file:4222"},
		{"fleet.nats default", app{config: other}, nil, "nats", ""},
		{"engagement_ttl default", app{config: other}, nil, "ttl", "30m0s"},
		{"engagement_ttl file", app{config: file}, nil, "ttl", "5m0s"},
		{"proxy timeouts default", app{config: other}, nil, "dial", "10s"},
		{"proxy listeners off", app{config: other}, nil, "proxy.listen", ""},
	}
	for _, c := range cases {
		cfg, err := loadWith(&c.flags, c.env)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got := get[c.what](cfg); got != c.want {
			t.Errorf("%s: %s = %q, want %q", c.name, c.what, got, c.want)
		}
	}
}

// A command's own flags (serve --listen, runner --nats-creds) win over the
// file through the same table; an empty flag leaves the file's value.
func TestCommandFlagsOverFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arizuko.toml")
	os.WriteFile(p, []byte("[server]\nlisten = \"127.0.0.1:1111\"\n[fleet]\nnats = \"nats://file:4222\"\ncreds = \"/file/creds\"\n"), 0o600)
	c, err := loadConfig(&app{config: p}, func(string) (string, bool) { return "", false },
		flagOverrides(map[string]string{"server.listen": "127.0.0.1:2222", "fleet.nats": "nats://flag:4222", "fleet.creds": ""})...)
	if err != nil {
		t.Fatal(err)
	}
	if c.Server.Listen != "127.0.0.1:2222" || c.Fleet.NATS != "nats://flag:4222" || c.Fleet.Creds != "/file/creds" {
		t.Fatalf("listen %q nats %q creds %q", c.Server.Listen, c.Fleet.NATS, c.Fleet.Creds)
	}
}

// Bad input in arizuko.toml or the environment gets the error crackbox gives
// for its own: the place, the key or variable, and the fix.
func TestConfigBadInput(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name, file string
		env        map[string]string
		want       []string
	}{
		{"unknown key", "[turns]\nmax_guests = 3\n", nil, []string{":2:1", `"turns.max_guests"`, "unknown key", "arizuko.toml.example"}},
		{"wrong type in the file", "[limits]\nfolders = \"many\"\n", nil, []string{":2", `"limits.folders"`, "wrong type"}},
		{"wrong type in the env", "", map[string]string{envObserveMessages: "lots"},
			[]string{"environment ARIZUKO_TURNS_OBSERVE_WINDOW_MESSAGES: turns.observe_window_messages: invalid number \"lots\": write a whole number"}},
		{"negative in the file", "[turns]\nobserve_window_chars = -5\n", nil, []string{"turns.observe_window_chars -5: want a positive whole number"}},
		{"negative in the env", "", map[string]string{envObserveChars: "-5"}, []string{"turns.observe_window_chars -5: want a positive whole number"}},
		{"renamed variable", "", map[string]string{"OBSERVE_WINDOW_CHARS": "5"}, []string{"$OBSERVE_WINDOW_CHARS is no longer read: rename it to $ARIZUKO_TURNS_OBSERVE_WINDOW_CHARS"}},
		{"config file from env missing", "", map[string]string{envConfig: filepath.Join(dir, "nope.toml")}, []string{"given with $ARIZUKO_CONFIG does not exist"}},
	} {
		p := filepath.Join(dir, "arizuko.toml")
		os.WriteFile(p, []byte(c.file), 0o600)
		flags := &app{config: p}
		if c.env[envConfig] != "" {
			flags = &app{}
		}
		_, err := loadWith(flags, c.env)
		if err == nil {
			t.Errorf("%s: no error", c.name)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", c.name, err, w)
			}
		}
	}
}

// arizuko warns about ARIZUKO_* variables it does not read, as crackbox does
// about CRACKBOX_*, and knows every variable it reads.
func TestUnknownVariableWarned(t *testing.T) {
	var out bytes.Buffer
	env := []string{"ARIZUKO_DATTA=/x", "ARIZUKO_MCP_SOCKET=/s", "HOME=/root"}
	for _, n := range []string{envConfig, envData, envStore, envServer, envToken, envObserveMessages, envObserveChars,
		envAdapterSecret, secrets.EnvKey, secrets.EnvKeyFile} {
		env = append(env, n+"=x")
	}
	arizukoTable.WarnUnknown(&out, env)
	if got := out.String(); !strings.HasPrefix(got, "arizuko: warning: ignoring unknown environment variable ARIZUKO_DATTA (") || strings.Count(got, "\n") != 1 {
		t.Fatalf("warnings:\n%s", got)
	}
}

// The README's list of arizuko's variables is the table's: each variable a
// key or the session reads is named there with its key.
func TestReadmeNamesEveryVariable(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for key, names := range arizukoTable.Env {
		for _, n := range names {
			if !strings.Contains(readme, "`"+n+"`") {
				t.Errorf("README does not name $%s (sets %s)", n, key)
			}
		}
		if !slices.Contains(arizukoTable.Keys(&session{}), key) && !strings.Contains(readme, "`"+key+"`") && !strings.HasPrefix(key, "turns.observe_window_") {
			t.Errorf("README does not name key %s beside its variable", key)
		}
	}
	if !strings.Contains(readme, "`"+arizukoTable.ConfigEnv+"`") {
		t.Errorf("README does not name $%s", arizukoTable.ConfigEnv)
	}
}
