package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/config"
)

func TestRunSecrets(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tok")
	os.WriteFile(file, []byte("file-value-123456\n"), 0o600)
	env := map[string]string{"API_KEY": "env-value-123456", "OTHER": "other-value-123456"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	cfgFile := filepath.Join(dir, "crackbox.toml")
	os.WriteFile(cfgFile, []byte("[[run.secret]]\nname = \"GH\"\nhosts = [\"github.com\"]\nfrom = \"file:"+file+"\"\n"), 0o600)
	cfg := config.Default()
	if err := config.DecodeFile(cfgFile, cfg); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  string // NAME@hosts=value;...
		err   string
	}{
		{"file entry", nil, "GH@github.com=file-value-123456", ""},
		{"flag from env", []string{"API_KEY@api.test,b.test"}, "GH@github.com=file-value-123456;API_KEY@api.test,b.test=env-value-123456", ""},
		{"flag from other env", []string{"API_KEY@api.test=env:OTHER"}, "GH@github.com=file-value-123456;API_KEY@api.test=other-value-123456", ""},
		{"flag replaces file entry", []string{"GH@gh.test=env:OTHER"}, "GH@gh.test=other-value-123456", ""},
		{"missing env", []string{"NOPE@x.test"}, "", "environment variable NOPE is not set"},
		{"no host", []string{"API_KEY"}, "", "want NAME@host"},
		{"bad source", []string{"API_KEY@x.test=vault:x"}, "", "want env:NAME or file:PATH"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := runSecrets(cfg, tc.flags, lookup)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				for _, v := range env {
					if strings.Contains(err.Error(), v) {
						t.Fatal("error holds a value")
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, s := range got {
				parts = append(parts, s.Name+"@"+strings.Join(s.Hosts, ",")+"="+s.Value)
			}
			if s := strings.Join(parts, ";"); s != tc.want {
				t.Fatalf("got %q, want %q", s, tc.want)
			}
		})
	}
}

func TestSecretSetRefusals(t *testing.T) {
	cfg := config.Default()
	secrets, err := runSecrets(cfg, []string{"API_KEY@api.test=env:X"}, func(string) (string, bool) { return "value-0123456789", true })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := secretSet(secrets, nil, "none"); err == nil {
		t.Fatal("--net none accepted")
	}
	if _, err := secretSet(secrets, []string{"API_KEY=x"}, "auto"); err == nil {
		t.Fatal("-e of the same name accepted")
	}
	set, err := secretSet(secrets, nil, "auto")
	if err != nil {
		t.Fatal(err)
	}
	if env := set.Env(); len(env) != 1 || strings.Contains(env[0], "value-0123456789") || !strings.HasPrefix(env[0], "API_KEY=") {
		t.Fatalf("env %v", env)
	}
}

// An earlier guest that could write the directory of =file:PATH may have
// replaced the file, or a directory on its path, with a symlink to a host
// file, which would then go upstream: it is not read.
func TestRunSecretFileRefusesSymlinks(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "shadow")
	os.WriteFile(victim, []byte("host-only-password\n"), 0o600)
	os.Symlink(victim, filepath.Join(dir, "tok"))
	os.Mkdir(filepath.Join(dir, "real"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", "tok"), []byte("host-only-password\n"), 0o600)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "sub"))
	for _, name := range []string{"tok", "sub/tok"} {
		got, err := runSecrets(config.Default(), []string{"API_KEY@api.test=file:" + filepath.Join(dir, name)}, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), "symlink") {
			t.Errorf("file:%s: got %d secrets, err %v; want a symlink refusal", name, len(got), err)
		}
		if err != nil && strings.Contains(err.Error(), "host-only-password") {
			t.Errorf("file:%s: the error quotes the file: %v", name, err)
		}
	}
	got, err := runSecrets(config.Default(), []string{"API_KEY@api.test=file:" + filepath.Join(dir, "real", "tok")}, os.LookupEnv)
	if err != nil || len(got) != 1 || got[0].Value != "host-only-password" {
		t.Fatalf("plain file: %v, %v", got, err)
	}
}
