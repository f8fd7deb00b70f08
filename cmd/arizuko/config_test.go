package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/crackbox/crackbox/pkg/arizuko/turn"
	"github.com/crackbox/crackbox/pkg/config"
)

func TestExampleConfigDecodes(t *testing.T) {
	c := defaultConfig()
	if err := config.DecodeFile("../../arizuko.toml.example", c); err != nil {
		t.Fatal(err)
	}
	if c.Routing.EngagementTTL.Duration != 30*time.Minute || c.Server.Listen != defaultListen {
		t.Fatalf("%+v", c)
	}
}

func TestConfigErrorsNameTheKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arizuko.toml")
	os.WriteFile(p, []byte("[server]\nlisten = \"x\"\nlisten_port = 1\n"), 0o600)
	_, err := (&app{config: p}).loadConfig()
	if err == nil || !strings.Contains(err.Error(), "server.listen_port") || !strings.Contains(err.Error(), p+":3") {
		t.Fatalf("err = %v", err)
	}
}

// The operator's [proxy] keys reach the runner every turn uses, through
// crackbox's own builder; keys that mean nothing for turns are refused.
func TestProxyConfigReachesTurnRunner(t *testing.T) {
	p := filepath.Join(t.TempDir(), "arizuko.toml")
	os.WriteFile(p, []byte("[proxy]\nresolver = \"127.0.0.53\"\nallow_cidrs = [\"10.9.0.0/16\"]\n[proxy.hosts]\n\"git.internal\" = [\"10.9.0.7\"]\n"), 0o600)
	a := &app{config: p}
	c, err := a.loadConfig()
	if err != nil {
		t.Fatal(err)
	}
	r, ok := newTurnRunner(c.Turns).(*turn.JailRunner)
	if !ok {
		t.Fatalf("runner %T", newTurnRunner(c.Turns))
	}
	o := r.Proxy
	if o.Resolver != "127.0.0.53:53" || len(o.AllowCIDRs) != 1 || o.AllowCIDRs[0].String() != "10.9.0.0/16" ||
		len(o.Hosts["git.internal"]) != 1 || o.Hosts["git.internal"][0].String() != "10.9.0.7" || o.DialTimeout != 10*time.Second {
		t.Fatalf("turn proxy options %+v", o)
	}
	for _, bad := range []string{"allow = [\"x.test\"]", "listen = \":3128\"", "resolver = \"not an ip\"", "allow_cidrs = [\"10.0.0.1\"]"} {
		os.WriteFile(p, []byte("[proxy]\n"+bad+"\n"), 0o600)
		if _, err := a.loadConfig(); err == nil || !strings.Contains(err.Error(), "proxy.") {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}

// pkg/jail reads no environment: the CRACKBOX_* guest settings reach the turn runner
// through arizuko's own wiring, and a value in arizuko.toml wins over them.
func TestCrackboxEnvReachesTurnRunner(t *testing.T) {
	env := map[string]string{"CRACKBOX_KERNEL": "/env/vmlinux", "CRACKBOX_GUEST_INIT": "/env/guest-init",
		"CRACKBOX_ACCEL": "tcg", "CRACKBOX_CACHE": "/var/cache/crackbox", "CRACKBOX_RUN_SNAPSHOT": "off"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	r := withCrackboxEnv(&turn.JailRunner{Kernel: "/file/vmlinux"}, lookup)
	if r.Kernel != "/file/vmlinux" || r.GuestInit != "/env/guest-init" || r.Accel != "tcg" ||
		r.CacheDir != "/var/cache/crackbox" || r.Snapshot != "off" {
		t.Fatalf("runner settings %+v", r)
	}
}

// Every key of arizuko.toml is in the example, so the example documents it
// ([proxy] names the keys of crackbox's table that shape turns).
func TestExampleHasEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../arizuko.toml.example")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := toml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(typ reflect.Type, at map[string]any, path string)
	walk = func(typ reflect.Type, at map[string]any, path string) {
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			key, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if key == "" || key == "-" || !f.IsExported() {
				continue
			}
			v, ok := at[key]
			if !ok {
				t.Errorf("arizuko.toml.example has no %s%s", path, key)
				continue
			}
			// [proxy] is crackbox's table: arizuko refuses the keys a
			// standalone proxy alone has (TestProxyConfigReachesTurnRunner).
			if key != "proxy" && f.Type.Kind() == reflect.Struct && f.Type.NumField() > 0 && f.Type.Field(0).IsExported() && f.Type.Field(0).Tag.Get("toml") != "" {
				if sub, ok := v.(map[string]any); ok {
					walk(f.Type, sub, path+key+".")
				}
			}
		}
	}
	walk(reflect.TypeOf(Config{}), doc, "")
}
