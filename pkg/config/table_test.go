package config

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

// A table over a struct shaped like arizuko's: a top-level key, sections, a
// nested section, a map and typed leaves; only the keys named in Env have a
// variable.
type tableCfg struct {
	DataDir string `toml:"data_dir"`
	Store   struct {
		URL string `toml:"url"`
	} `toml:"store"`
	Fleet struct {
		Replicas int                 `toml:"replicas"`
		LeaseTTL Duration            `toml:"lease_ttl"`
		Require  map[string][]string `toml:"require"`
		Home     struct {
			MaxBytes int64 `toml:"max_bytes"`
		} `toml:"home"`
	} `toml:"fleet"`
	hidden string
}

var testTable = &Table{
	Binary: "tool", Example: "tool.toml.example", Prefix: "TOOL_", ConfigEnv: "TOOL_CONFIG",
	Env:          map[string][]string{"data_dir": {"TOOL_DATA"}, "store.url": {"TOOL_STORE"}, "fleet.replicas": {"TOOL_FLEET_REPLICAS"}},
	Other:        []string{"TOOL_SECRET"},
	IgnorePrefix: "TOOL_TEST_",
	Renamed:      map[string]string{"OLD_DATA": "TOOL_DATA"},
	EnvHint:      "see tool.toml.example",
}

func TestTableKeysWalkNestedSections(t *testing.T) {
	got := strings.Join(testTable.Keys(&tableCfg{}), " ")
	if want := "data_dir store.url fleet.replicas fleet.lease_ttl fleet.require fleet.home.max_bytes"; got != want {
		t.Fatalf("keys %q, want %q", got, want)
	}
}

// Flag over env over file over default, for every kind of key, exactly as
// crackbox's Load resolves its own.
func TestTablePrecedence(t *testing.T) {
	dir := t.TempDir()
	file := writeFile(t, dir, "tool.toml", "data_dir = \"/file\"\n[store]\nurl = \"pg://file\"\n[fleet]\nreplicas = 2\nlease_ttl = \"20s\"\n[fleet.home]\nmax_bytes = 7\n[fleet.require]\nacme = [\"kvm=true\"]\n")
	other := writeFile(t, dir, "other.toml", "data_dir = \"/other\"\n")
	type row struct {
		name  string
		src   Source
		check func(c *tableCfg) bool
	}
	rows := []row{
		{"default", Source{LookupEnv: envMap(nil)}, func(c *tableCfg) bool { return c.DataDir == "/default" && c.Fleet.Replicas == 3 }},
		{"file", Source{Path: file, LookupEnv: envMap(nil)}, func(c *tableCfg) bool {
			return c.DataDir == "/file" && c.Store.URL == "pg://file" && c.Fleet.Replicas == 2 && c.Fleet.LeaseTTL.Seconds() == 20 &&
				c.Fleet.Home.MaxBytes == 7 && c.Fleet.Require["acme"][0] == "kvm=true"
		}},
		{"config env names the file", Source{LookupEnv: envMap(map[string]string{"TOOL_CONFIG": other})}, func(c *tableCfg) bool { return c.DataDir == "/other" }},
		{"config flag over config env", Source{Path: file, LookupEnv: envMap(map[string]string{"TOOL_CONFIG": other})}, func(c *tableCfg) bool { return c.DataDir == "/file" }},
		{"env over file", Source{Path: file, LookupEnv: envMap(map[string]string{"TOOL_DATA": "/env", "TOOL_FLEET_REPLICAS": "5"})},
			func(c *tableCfg) bool {
				return c.DataDir == "/env" && c.Fleet.Replicas == 5 && c.Store.URL == "pg://file"
			}},
		{"set-but-empty env clears", Source{Path: file, LookupEnv: envMap(map[string]string{"TOOL_STORE": ""})}, func(c *tableCfg) bool { return c.Store.URL == "" }},
		{"flag over env", Source{Path: file, LookupEnv: envMap(map[string]string{"TOOL_DATA": "/env"}),
			Overrides: []Override{{"data_dir", "/flag"}, {"fleet.home.max_bytes", "9"}, {"fleet.require", "a=x,y;b=z"}}},
			func(c *tableCfg) bool {
				return c.DataDir == "/flag" && c.Fleet.Home.MaxBytes == 9 && len(c.Fleet.Require["a"]) == 2 && c.Fleet.Require["b"][0] == "z"
			}},
		{"search path", Source{LookupEnv: envMap(nil)}, nil},
	}
	for _, r := range rows {
		c := &tableCfg{DataDir: "/default"}
		c.Fleet.Replicas = 3
		var search []string
		if r.check == nil {
			search = []string{dir + "/missing.toml", other}
			r.check = func(c *tableCfg) bool { return c.DataDir == "/other" }
		}
		got, err := testTable.Load(c, r.src, search)
		if err != nil {
			t.Errorf("%s: %v", r.name, err)
			continue
		}
		if !r.check(c) {
			t.Errorf("%s: file %q, config %+v", r.name, got, c)
		}
	}
}

// Bad input names the key, the variable or the flag, and the fix.
func TestTableErrors(t *testing.T) {
	dir := t.TempDir()
	empty := writeFile(t, dir, "empty.toml", "")
	for _, tt := range []struct {
		name string
		src  Source
		want []string
		is   error
	}{
		{"unknown key in the file", Source{Path: writeFile(t, dir, "u.toml", "[fleet]\nreplica = 1\n"), LookupEnv: envMap(nil)},
			[]string{"u.toml:2:1", `"fleet.replica"`, "tool.toml.example"}, ErrUnknownKey},
		{"wrong type in the file", Source{Path: writeFile(t, dir, "w.toml", "[fleet]\nreplicas = \"many\"\n"), LookupEnv: envMap(nil)},
			[]string{"w.toml:2", "fleet.replicas", "wrong type"}, nil},
		{"wrong type in the env", Source{Path: empty, LookupEnv: envMap(map[string]string{"TOOL_FLEET_REPLICAS": "many"})},
			[]string{"environment TOOL_FLEET_REPLICAS: fleet.replicas: invalid number \"many\": write a whole number"}, nil},
		{"wrong type in a flag", Source{Path: empty, LookupEnv: envMap(nil), Overrides: []Override{{"fleet.lease_ttl", "soon"}}},
			[]string{"flag: fleet.lease_ttl", "30s"}, nil},
		{"unknown flag key", Source{Path: empty, LookupEnv: envMap(nil), Overrides: []Override{{"fleet.nope", "1"}}},
			[]string{"fleet.nope", "known: data_dir"}, ErrUnknownSetting},
		{"missing config file from the env", Source{LookupEnv: envMap(map[string]string{"TOOL_CONFIG": dir + "/nope.toml"})},
			[]string{"given with $TOOL_CONFIG does not exist"}, nil},
		{"renamed variable", Source{Path: empty, LookupEnv: envMap(map[string]string{"OLD_DATA": "/x"})},
			[]string{"$OLD_DATA is no longer read: rename it to $TOOL_DATA"}, nil},
	} {
		_, err := testTable.Load(&tableCfg{}, tt.src, nil)
		if err == nil {
			t.Errorf("%s: no error", tt.name)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q lacks %q", tt.name, err, w)
			}
		}
		if tt.is != nil && !errors.Is(err, tt.is) {
			t.Errorf("%s: error %v is not %v", tt.name, err, tt.is)
		}
	}
}

func TestTableWarnsUnknownVariables(t *testing.T) {
	var out bytes.Buffer
	testTable.WarnUnknown(&out, []string{"TOOL_DATA=x", "TOOL_DATTA=x", "TOOL_SECRET=s", "TOOL_CONFIG=c", "TOOL_TEST_X=1", "OTHER=1", "TOOL_FLEET_REPLICAS=1", "TOOL_STORE_URL=x"})
	want := "tool: warning: ignoring unknown environment variable TOOL_DATTA (see tool.toml.example)\n" +
		"tool: warning: ignoring unknown environment variable TOOL_STORE_URL (see tool.toml.example)\n"
	if out.String() != want {
		t.Fatalf("warnings:\n%s\nwant:\n%s", out.String(), want)
	}
	// crackbox's own table knows every key's variables and the others it reads.
	out.Reset()
	Crackbox.WarnUnknown(&out, []string{"CRACKBOX_RUN_KERNEL=k", "CRACKBOX_KERNEL=k", "CRACKBOX_STATE_KEY=s", "CRACKBOX_TEST_REQUIRE=all", "CRACKBOX_KERNAL=k"})
	if !strings.Contains(out.String(), "CRACKBOX_KERNAL") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("crackbox warnings:\n%s", out.String())
	}
}
