package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestResolveEnv(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "env")
	os.WriteFile(file, []byte("# comment\n\nFROM_FILE=1\nSHARED=file\nHOSTVAR\n"), 0o600)
	host := map[string]string{"HOSTVAR": "from-host", "TOKEN": "t0k"}
	lookup := func(k string) (string, bool) { v, ok := host[k]; return v, ok }

	got, err := resolveEnv([]string{"A=1", "SHARED=flag", "TOKEN", "UNSET_ON_HOST", "EMPTY="}, []string{file}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"FROM_FILE=1", "SHARED=file", "HOSTVAR=from-host", "A=1", "SHARED=flag", "TOKEN=t0k", "EMPTY="}
	if !slices.Equal(got, want) {
		t.Fatalf("ResolveEnv = %q, want %q", got, want)
	}

	for _, bad := range [][]string{{"=x"}, {"A B=1"}} {
		if _, err := resolveEnv(bad, nil, lookup); err == nil || !strings.Contains(err.Error(), bad[0]) {
			t.Errorf("resolveEnv(%q) err = %v, want an error naming it", bad, err)
		}
	}
	if _, err := resolveEnv(nil, []string{filepath.Join(dir, "missing")}, lookup); err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing env file: err = %v", err)
	}
}

// An earlier guest that could write the directory of --env-file may have
// replaced the file, or a directory on its path, with a symlink to a host
// file, or with a fifo: none is read, and the error says why.
func TestEnvFileRefusesPlantedFiles(t *testing.T) {
	dir := t.TempDir()
	victim := filepath.Join(dir, "shadow")
	os.WriteFile(victim, []byte("PASSWORD=host-only-secret\n"), 0o600)
	os.Symlink(victim, filepath.Join(dir, ".env"))
	os.Mkdir(filepath.Join(dir, "real"), 0o700)
	os.WriteFile(filepath.Join(dir, "real", ".env"), []byte("PASSWORD=host-only-secret\n"), 0o600)
	os.Symlink(filepath.Join(dir, "real"), filepath.Join(dir, "sub"))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{".env", "sub/.env", "fifo"} {
		got, err := resolveEnv(nil, []string{filepath.Join(dir, name)}, os.LookupEnv)
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("--env-file %s: got %q, err %v; want an error naming it", name, got, err)
		}
		if err != nil && strings.Contains(err.Error(), "host-only-secret") {
			t.Errorf("--env-file %s: the error quotes the file: %v", name, err)
		}
	}
	got, err := resolveEnv(nil, []string{filepath.Join(dir, "real", ".env")}, os.LookupEnv)
	if err != nil || !slices.Equal(got, []string{"PASSWORD=host-only-secret"}) {
		t.Fatalf("plain file: %q, %v", got, err)
	}
}
