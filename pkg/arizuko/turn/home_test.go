package turn

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/crackbox/crackbox/internal/testreq"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
	"github.com/crackbox/crackbox/pkg/jail"
	"github.com/crackbox/crackbox/pkg/jail/install"
)

// homeRunner records the host home and socket each folder's attempt got.
type homeRunner struct {
	mu     sync.Mutex
	homes  map[string]string
	socket map[string]string
}

func (r *homeRunner) Run(ctx context.Context, j Job) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.homes[j.Turn.Folder] = j.HostHome
	r.socket[j.Turn.Folder] = j.Socket
	return Result{}, nil
}

func inside(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+string(filepath.Separator))
}

// A parent folder's guest writes its whole home. The child's home must not lie
// inside it, so a symlink the parent plants (here where the child's directory
// sat in a nested layout) changes nothing about what the child's guest gets.
func TestNestedFoldersGetSiblingHomes(t *testing.T) {
	e := newEnv(t, "", "a", "a/b")
	r := &homeRunner{homes: map[string]string{}, socket: map[string]string{}}
	e.start(t, r, nil)
	e.post(t, "web:a", "hi")
	e.waitTurns(t, "a", 1)
	r.mu.Lock()
	aHome := r.homes["a"]
	r.mu.Unlock()
	if err := os.Symlink("/etc", filepath.Join(aHome, "b")); err != nil {
		t.Fatal(err)
	}
	e.post(t, "web:a/b", "hi")
	if ts := e.waitTurns(t, "a/b", 1); ts[0].Status != store.TurnDone {
		t.Fatalf("child turn %+v", ts[0])
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	bHome := r.homes["a/b"]
	if want := filepath.Join(e.data, "homes", "a%2Fb"); bHome != want {
		t.Fatalf("child home %s, want %s", bHome, want)
	}
	if inside(bHome, aHome) || inside(aHome, bHome) {
		t.Fatalf("homes nest: %s and %s", aHome, bHome)
	}
	if fi, err := os.Lstat(bHome); err != nil || !fi.IsDir() || fi.Mode()&os.ModeSymlink != 0 {
		t.Fatalf("child home is not a plain directory: %v %v", fi, err)
	}
	// The socket the bridge serves stays outside every guest's share.
	for f, s := range r.socket {
		for _, h := range r.homes {
			if inside(s, h) {
				t.Fatalf("%s's socket %s lies inside share %s", f, s, h)
			}
		}
	}
}

// The runner shares the home only if no component of its path is a symlink.
func TestJailRunnerRefusesSymlinkedHome(t *testing.T) {
	_, qerr := install.FindQEMU()
	testreq.Check(t, qerr, "qemu-system-x86_64", "make deps installs it")
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "home")
	if err := os.Mkdir(real, 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	r := &JailRunner{NetMode: jail.NetNone, Accel: "tcg", UID: 1000, GID: 1000, RunsDir: t.TempDir()}
	_, err := r.Run(context.Background(), Job{Turn: store.Turn{ID: 1, Folder: "a"}, Argv: []string{"true"},
		HostHome: link, GuestHome: DefaultGuestHome})
	if !errors.Is(err, jail.ErrShareSymlink) || !errors.Is(err, ErrTerminal) {
		t.Fatalf("Run with a symlinked home = %v, want ErrShareSymlink and ErrTerminal", err)
	}
}
