// Package servicetest is the one fixture tests use for arizuko's control
// plane: a fresh data dir with a bootstrapped service.Local on real SQLite,
// folders added as the admin principal, and the scripted example agent
// installed in a folder's home. Everything it makes is removed when the test
// ends.
package servicetest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/service"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/secrets"
)

// Options shape the fixture; the zero value is a keyless, bootstrapped
// service without folders.
type Options struct {
	// Data is an existing data dir to open (created and removed by New when "").
	Data string
	// Keyed gives the service a fresh secrets key ring, so folder secrets can
	// be set and read.
	Keyed bool
	// MaxTurnsPerDay is service.Options.MaxTurnsPerDay.
	MaxTurnsPerDay int
	// Limits is service.Options.Limits (none by default).
	Limits service.Limits
}

// Env is one open data dir.
type Env struct {
	L     *service.Local
	Store *store.Store
	Data  string
	// Admin is a context acting as the data dir's admin principal.
	Admin context.Context
}

// New opens a bootstrapped service on a fresh data dir. The dir's path is
// short, because turn tests bind unix sockets under it.
func New(t testing.TB, o Options) *Env {
	t.Helper()
	data := o.Data
	if data == "" {
		var err error
		if data, err = os.MkdirTemp("", "az"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(data) })
	}
	opts := service.Options{DataDir: data, Create: true, MaxTurnsPerDay: o.MaxTurnsPerDay, Limits: o.Limits}
	if o.Keyed {
		opts.Ring = Ring(t)
	}
	ctx := context.Background()
	l, err := service.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	return &Env{L: l, Store: l.Store(), Data: data, Admin: service.WithPrincipal(ctx, service.AdminPrincipal)}
}

// Ring is a fresh one-key secrets ring.
func Ring(t testing.TB) *secrets.Ring {
	t.Helper()
	keys, err := secrets.ParseKeys(secrets.GenerateKey())
	if err != nil {
		t.Fatal(err)
	}
	r, err := secrets.NewRing(keys...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// AddFolder adds the folder path whose turns run argv (none: no agent).
func (e *Env) AddFolder(t testing.TB, path string, argv ...string) store.Folder {
	t.Helper()
	f, err := e.L.AddFolder(e.Admin, store.Folder{Path: path, AgentCommand: argv})
	if err != nil {
		t.Fatalf("add folder %s: %v", path, err)
	}
	return f
}

// AgentScript is the scripted example agent, examples/agents/scripted/agent.py.
func AgentScript(t testing.TB) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	p := filepath.Join(filepath.Dir(file), "..", "..", "examples", "agents", "scripted", "agent.py")
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// InstallAgent copies the scripted agent into the home of folder path as
// agent.py, where an agent command of "python3 <guest home>/agent.py" finds it.
func (e *Env) InstallAgent(t testing.TB, path string) {
	t.Helper()
	b, err := os.ReadFile(AgentScript(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Data, "homes", folder.HomeName(path), "agent.py"), b, 0o755); err != nil {
		t.Fatal(err)
	}
}
