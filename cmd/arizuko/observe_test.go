package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// observe ls shows observations on the data dir; observe rm ends one through
// the daemon's API.
func TestObserveLsRm(t *testing.T) {
	data, e := initData(t)
	mustAz(t, e, "folder", "add", "acme")
	mustAz(t, e, "folder", "add", "globex")
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(data, "arizuko.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.AddObserver(ctx, "acme", "globex"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	if out := mustAz(t, e, "observe", "ls"); !strings.Contains(out, "acme") || !strings.Contains(out, "globex") {
		t.Fatalf("observe ls:\n%s", out)
	}
	startDaemon(t, e, data)
	if out := mustAz(t, e, "observe", "ls", "acme"); !strings.Contains(out, "globex") {
		t.Fatalf("observe ls acme via the API:\n%s", out)
	}
	mustAz(t, e, "observe", "rm", "acme", "globex")
	if out := mustAz(t, e, "--json", "observe", "ls"); strings.TrimSpace(out) != "[]" {
		t.Fatalf("after rm: %s", out)
	}
	if _, stderr, err := az(t, e, "observe", "rm", "acme", "globex"); err == nil || !strings.Contains(stderr, "not found") {
		t.Fatalf("rm of a missing observation: %v %s", err, stderr)
	}
}
