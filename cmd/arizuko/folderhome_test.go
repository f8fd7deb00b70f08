package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// `folder home` resolves the home from the data dir the config names, as the
// daemon does, not from $ARIZUKO_DATA's default; it refuses a folder that
// does not exist rather than make a stray home.
func TestFolderHomeFollowsConfigDataDir(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "from-config")
	cfg := filepath.Join(dir, "arizuko.toml")
	if err := os.WriteFile(cfg, []byte("data_dir = \""+data+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "ARIZUKO_CONFIG=" + cfg}
	mustAz(t, e, "init")
	mustAz(t, e, "folder", "add", "corp")
	mustAz(t, e, "folder", "add", "corp/eng")
	got := strings.TrimSpace(mustAz(t, e, "folder", "home", "--create", "corp/eng"))
	if want := filepath.Join(data, "homes", "corp%2Feng"); got != want {
		t.Fatalf("folder home = %q, want %q", got, want)
	}
	if fi, err := os.Stat(got); err != nil || !fi.IsDir() {
		t.Fatalf("home not created: %v", err)
	}
	if _, errs, err := az(t, e, "folder", "home", "--create", "nosuch"); err == nil || !strings.Contains(errs, `folder "nosuch": not found`) {
		t.Fatalf("missing folder: %v %q", err, errs)
	}
	if _, err := os.Stat(filepath.Join(data, "homes", "nosuch")); !os.IsNotExist(err) {
		t.Fatalf("a home was made for a missing folder: %v", err)
	}
}
