package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func envMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func writeFile(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("defaults do not validate: %v", err)
	}
}

func TestPrecedence(t *testing.T) {
	file := writeFile(t, t.TempDir(), "c.toml", `
[proxy]
listen = "127.0.0.1:1001"
transparent = "127.0.0.1:2001"
allow = ["file.example"]
default_ports = [8443]
[run]
accel = "tcg"
memory = "1G"
[admin]
secret = "from-file"
`)
	tests := []struct {
		name  string
		env   map[string]string
		flags []Override
		check func(*Config) (got, want any)
	}{
		{"default when unset", nil, nil, func(c *Config) (any, any) { return c.Admin.Listen, "127.0.0.1:3129" }},
		{"file over default", nil, nil, func(c *Config) (any, any) { return c.Proxy.Listen, "127.0.0.1:1001" }},
		{"file list replaces default list", nil, nil, func(c *Config) (any, any) { return c.Proxy.DefaultPorts, []int{8443} }},
		{"env over file", map[string]string{"CRACKBOX_PROXY_LISTEN": "127.0.0.1:1002"}, nil,
			func(c *Config) (any, any) { return c.Proxy.Listen, "127.0.0.1:1002" }},
		{"flag over env", map[string]string{"CRACKBOX_PROXY_LISTEN": "127.0.0.1:1002"},
			[]Override{{"proxy.listen", "127.0.0.1:1003"}},
			func(c *Config) (any, any) { return c.Proxy.Listen, "127.0.0.1:1003" }},
		{"empty env disables listener", map[string]string{"CRACKBOX_PROXY_TRANSPARENT": ""}, nil,
			func(c *Config) (any, any) { return c.Proxy.Transparent, "" }},
		{"empty flag disables listener", nil, []Override{{"proxy.transparent", ""}},
			func(c *Config) (any, any) { return c.Proxy.Transparent, "" }},
		{"env secret", map[string]string{"CRACKBOX_ADMIN_SECRET": "s3"}, nil,
			func(c *Config) (any, any) { return c.Admin.Secret, "s3" }},
		{"short run env", map[string]string{"CRACKBOX_ACCEL": "kvm"}, nil,
			func(c *Config) (any, any) { return c.Run.Accel, "kvm" }},
		{"long run env beats short", map[string]string{"CRACKBOX_ACCEL": "kvm", "CRACKBOX_RUN_ACCEL": "auto"}, nil,
			func(c *Config) (any, any) { return c.Run.Accel, "auto" }},
		{"short snapshot env", map[string]string{"CRACKBOX_SNAPSHOT": "off"}, nil,
			func(c *Config) (any, any) { return c.Run.Snapshot, "off" }},
		{"short cache env", map[string]string{"CRACKBOX_CACHE": "/var/cache/crackbox"}, nil,
			func(c *Config) (any, any) { return c.Run.Cache, "/var/cache/crackbox" }},
		{"size from file", nil, nil, func(c *Config) (any, any) { return c.Run.Memory.MiB(), uint64(1024) }},
		{"env list", map[string]string{"CRACKBOX_PROXY_ALLOW": "a.example, b.example:8080"}, nil,
			func(c *Config) (any, any) { return c.Proxy.Allow, []string{"a.example", "b.example:8080"} }},
		{"env duration", map[string]string{"CRACKBOX_PROXY_DRAIN_GRACE": "2s"}, nil,
			func(c *Config) (any, any) { return c.Proxy.DrainGrace.Duration, 2 * time.Second }},
		{"env hosts", map[string]string{"CRACKBOX_PROXY_HOSTS": "a=10.0.0.1,10.0.0.2;b=::1"}, nil,
			func(c *Config) (any, any) {
				return c.Proxy.Hosts, map[string][]string{"a": {"10.0.0.1", "10.0.0.2"}, "b": {"::1"}}
			}},
		{"resolver gains port", map[string]string{"CRACKBOX_PROXY_RESOLVER": "10.0.0.53"}, nil,
			func(c *Config) (any, any) { return c.Proxy.Resolver, "10.0.0.53:53" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load(Source{Path: file, LookupEnv: envMap(tt.env), Overrides: tt.flags})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := tt.check(cfg); !reflect.DeepEqual(got, want) {
				t.Errorf("got %v, want %v", got, want)
			}
			if cfg.File != file {
				t.Errorf("File = %q, want %q", cfg.File, file)
			}
		})
	}
}

func TestDecodeErrorsNamePlace(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, body string
		want       []string
		is         error
	}{
		{"unknown key", "[proxy]\nlisten = \":1\"\nlisen = \":2\"\n", []string{"c.toml:3:", `"proxy.lisen"`, "unknown key"}, ErrUnknownKey},
		{"unknown section", "[proxi]\nlisten = \":1\"\n", []string{"c.toml:1:", `"proxi"`}, ErrUnknownKey},
		{"wrong type", "[run]\ncpus = \"two\"\n", []string{"c.toml:2:", `"run.cpus"`, "want int"}, nil},
		{"bad duration", "[proxy]\ndial_timeout = \"ten\"\n", []string{"c.toml:2:", `"proxy.dial_timeout"`, "30s"}, nil},
		{"bad size", "[run]\nmemory = \"lots\"\n", []string{"c.toml:2:", `"run.memory"`, "512M"}, nil},
		{"syntax", "[proxy\n", []string{"c.toml:1:"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := writeFile(t, dir, "c.toml", tt.body)
			_, err := Load(Source{Path: p, LookupEnv: envMap(nil)})
			if err == nil {
				t.Fatal("want error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
		})
	}
}

func TestInvalidValues(t *testing.T) {
	tests := []struct {
		key, value, want string
	}{
		{"proxy.listen", "3128", "host:port"},
		{"proxy.listen", "127.0.0.1:http", "port must be a number"},
		{"proxy.allow_cidrs", "10.0.0.0", "not a CIDR"},
		{"proxy.default_ports", "0", "out of range"},
		{"proxy.default_ports", "x", "invalid number"},
		{"proxy.resolver", "dns.google", "IP with optional port"},
		{"proxy.hosts", "a=not-ip", "not an IP"},
		{"proxy.hosts", "justname", "name=ip"},
		{"proxy.client", "10.0.0", "not an IP"},
		{"proxy.dial_timeout", "-1s", "negative"},
		{"proxy.dial_timeout", "0", "must be positive"},
		{"proxy.header_timeout", "0", "must be positive"},
		{"proxy.max_client_conns", "0", "at least one connection"},
		{"proxy.allow", "bad entry", "not a URL"},
		{"proxy.allow", "*.co.uk", "public suffix"},
		{"admin.listen", "localhost", "host:port"},
		{"run.accel", "hvf", "auto, kvm, tcg"},
		{"run.memory", "1M", "at least 64M"},
		{"run.cpus", "0", "1-256"},
		{"run.net", "bridge", "use one of"},
		{"run.addr_pool", "10.0.0.1/31", "IPv4 CIDR"},
		{"run.timeout", "forever", "30s"},
		{"run.snapshot", "yes", "auto, on, off"},
		{"run.cache", "relative/dir", "absolute directory"},
		{"log.level", "loud", "debug, info"},
		{"proxy.registry", "nats://n1:4222", "proxy.registry_sign_key"},
		{"proxy.registry_insecure", "maybe", "true or false"},
		{"proxy.registry_sign_key", "/etc/k.nk", "without proxy.registry"},
	}
	for _, tt := range tests {
		t.Run(tt.key+"="+tt.value, func(t *testing.T) {
			_, err := Load(Source{Path: writeFile(t, t.TempDir(), "empty.toml", ""),
				LookupEnv: envMap(nil), Overrides: []Override{{tt.key, tt.value}}})
			if err == nil {
				t.Fatal("want error")
			}
			if !strings.Contains(err.Error(), tt.key) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q should name %q and say %q", err, tt.key, tt.want)
			}
		})
	}
}

func TestEnvErrorNamesVariable(t *testing.T) {
	_, err := Load(Source{Path: writeFile(t, t.TempDir(), "e.toml", ""),
		LookupEnv: envMap(map[string]string{"CRACKBOX_RUN_CPUS": "many"})})
	if err == nil || !strings.Contains(err.Error(), "CRACKBOX_RUN_CPUS") {
		t.Fatalf("want error naming CRACKBOX_RUN_CPUS, got %v", err)
	}
}

func TestUnknownOverride(t *testing.T) {
	_, err := Load(Source{Path: writeFile(t, t.TempDir(), "e.toml", ""), LookupEnv: envMap(nil),
		Overrides: []Override{{"proxy.nope", "1"}}})
	if !errors.Is(err, ErrUnknownSetting) {
		t.Fatalf("want ErrUnknownSetting, got %v", err)
	}
}

func TestLookupOrder(t *testing.T) {
	root := t.TempDir()
	xdg, home := filepath.Join(root, "xdg"), filepath.Join(root, "home")
	old := systemPath
	systemPath = filepath.Join(root, "etc", "crackbox", "crackbox.toml")
	t.Cleanup(func() { systemPath = old })
	env := envMap(map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home})

	load := func() *Config {
		t.Helper()
		cfg, err := Load(Source{LookupEnv: env})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	if cfg := load(); cfg.File != "" || cfg.Proxy.Listen != ":3128" {
		t.Fatalf("no files: got file %q listen %q, want defaults", cfg.File, cfg.Proxy.Listen)
	}
	steps := []struct {
		path, listen string
	}{
		{systemPath, "127.0.0.1:3"},
		{filepath.Join(home, ".config", "crackbox", "crackbox.toml"), "127.0.0.1:2"},
		{filepath.Join(xdg, "crackbox", "crackbox.toml"), "127.0.0.1:1"},
	}
	for _, s := range steps {
		writeFile(t, "/", s.path, "[proxy]\nlisten = \""+s.listen+"\"\n")
		cfg := load()
		if cfg.File != s.path || cfg.Proxy.Listen != s.listen {
			t.Errorf("after writing %s: loaded %q listen %q", s.path, cfg.File, cfg.Proxy.Listen)
		}
	}
	// An invalid file earlier in the order is an error, not skipped.
	writeFile(t, "/", steps[2].path, "[proxy]\nlisten = 1\n")
	if _, err := Load(Source{LookupEnv: env}); err == nil || !strings.Contains(err.Error(), steps[2].path) {
		t.Errorf("invalid xdg file: want error naming it, got %v", err)
	}
}

func TestExplicitMissingConfig(t *testing.T) {
	_, err := Load(Source{Path: filepath.Join(t.TempDir(), "nope.toml"), LookupEnv: envMap(nil)})
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "nope.toml") {
		t.Fatalf("want not-exist error naming the file, got %v", err)
	}
}

// A --config path a sandbox could have replaced with a symlink, to a file
// of its own elsewhere or a host file, is not read.
func TestExplicitConfigRefusesSymlink(t *testing.T) {
	dir := t.TempDir()
	real := writeFile(t, dir, "real.toml", "[run]\nmemory = \"1G\"\n")
	link := filepath.Join(dir, "crackbox.toml")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	_, err := Load(Source{Path: link, LookupEnv: envMap(nil)})
	if err == nil || !strings.Contains(err.Error(), "symlink") || !strings.Contains(err.Error(), link) {
		t.Fatalf("err = %v, want a symlink refusal naming %s", err, link)
	}
	if _, err := Load(Source{Path: real, LookupEnv: envMap(nil)}); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeFileGeneric(t *testing.T) {
	var v struct {
		Name string `toml:"name"`
	}
	p := writeFile(t, t.TempDir(), "x.toml", "name = \"a\"\nother = 1\n")
	err := DecodeFile(p, &v)
	var fe *FileError
	if !errors.As(err, &fe) || fe.Line != 2 || fe.Key != "other" || fe.Path != p {
		t.Fatalf("want FileError at line 2 key other, got %#v", err)
	}
}

func TestExampleMatchesDefaults(t *testing.T) {
	// The shipped example must decode strictly, document every key, and
	// restate the defaults so it can be copied as is.
	body, err := os.ReadFile("../../crackbox.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{}
	if err := Decode("crackbox.toml.example", body, cfg); err != nil {
		t.Fatal(err)
	}
	for _, key := range Keys() {
		_, name, _ := strings.Cut(key, ".")
		if !strings.Contains(string(body), "\n"+name+" =") && !strings.Contains(string(body), "\n# "+name+" =") {
			t.Errorf("example does not document %s", key)
		}
	}
	want := Default()
	if !reflect.DeepEqual(cfg.Proxy.DefaultPorts, want.Proxy.DefaultPorts) || !reflect.DeepEqual(cfg.Run, want.Run) || cfg.Admin != want.Admin ||
		cfg.Proxy.Listen != want.Proxy.Listen || cfg.Proxy.DrainGrace != want.Proxy.DrainGrace {
		t.Errorf("example values differ from defaults:\n got %+v\nwant %+v", cfg, want)
	}
}

func TestSizeText(t *testing.T) {
	for in, want := range map[string]Size{"512M": 512 << 20, "2g": 2 << 30, "1024": 1024, "64MB": 64 << 20, "1T": 1 << 40} {
		var s Size
		if err := s.UnmarshalText([]byte(in)); err != nil || s != want {
			t.Errorf("%q: got %d, %v; want %d", in, s, err, want)
		}
	}
	if Size(512<<20).String() != "512M" || Size(1000).String() != "1000" {
		t.Errorf("String: %s %s", Size(512<<20), Size(1000))
	}
	for _, bad := range []string{"", "M", "-1M", "1.5G", "0"} {
		var s Size
		if err := s.UnmarshalText([]byte(bad)); err == nil {
			t.Errorf("%q: want error", bad)
		}
	}
}
