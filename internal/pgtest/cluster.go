// Package pgtest runs a real, throwaway PostgreSQL server for tests: initdb into a temp
// dir, then postgres listening only on a unix socket in that dir, as an unprivileged user
// (nobody when the tests run as root, since postgres refuses root). The server is a child
// of the test process that dies with it, and the dir is removed when the cluster stops.
//
// Tests that need many databases share one cluster per test binary (Main and DB); a test
// that wants a server of its own calls Start.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver

	"github.com/crackbox/crackbox/internal/proc"
	"github.com/crackbox/crackbox/internal/testreq"
)

// Superuser is the role initdb creates; databases belong to it.
const Superuser = "postgres"

// nobody is the uid and gid the server runs as when the tests run as root.
const nobody = 65534

// Cluster is one running server.
type Cluster struct {
	dir  string // data dir's parent: socket, log
	cmd  *exec.Cmd
	done chan struct{} // closed when the server has exited
	dbs  atomic.Int64
}

// Start runs a cluster that stops, and whose dir is removed, when t ends. Without the
// server binaries it skips, or fails under CRACKBOX_TEST_REQUIRE=all.
func Start(t testing.TB) *Cluster {
	t.Helper()
	bin := binDir(t)
	c, err := start(bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	return c
}

// binDir finds Debian's server binaries, the newest major version if several.
func binDir(t testing.TB) string {
	t.Helper()
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	for _, d := range dirs {
		if isFile(filepath.Join(d, "initdb")) && isFile(filepath.Join(d, "postgres")) {
			return d
		}
	}
	testreq.Missing(t, "PostgreSQL server binaries (initdb, postgres under /usr/lib/postgresql/*/bin)",
		"run `make deps`, which installs Debian's postgresql")
	return ""
}

func major(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

func isFile(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

func start(bin string) (*Cluster, error) {
	dir, err := os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, done: make(chan struct{})}
	if err := c.initdb(bin); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.serve(bin); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	if err := c.waitReady(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// initdb creates the data dir. The collation is ICU en-US, as a production database
// typically has, not C: code that needs byte order must ask for it.
func (c *Cluster) initdb(bin string) error {
	if os.Geteuid() == 0 {
		if err := os.Chown(c.dir, nobody, nobody); err != nil {
			return err
		}
	}
	cmd := c.command(filepath.Join(bin, "initdb"), "-D", c.dataDir(), "-U", Superuser, "-A", "trust", "-E", "UTF8",
		"--locale=C.UTF-8", "--locale-provider=icu", "--icu-locale=en-US", "--no-sync", "--no-instructions")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	return nil
}

// serve starts postgres as a direct child (not daemonized by pg_ctl) so that it gets
// SIGQUIT, an immediate shutdown, if the test binary dies without cleaning up.
func (c *Cluster) serve(bin string) error {
	logf, err := os.Create(c.logFile())
	if err != nil {
		return err
	}
	defer logf.Close()
	if os.Geteuid() == 0 {
		if err := logf.Chown(nobody, nobody); err != nil {
			return err
		}
	}
	c.cmd = c.command(filepath.Join(bin, "postgres"), "-D", c.dataDir(), "-k", c.dir,
		"-c", "listen_addresses=", "-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off",
		"-c", "max_connections=200")
	c.cmd.Stdout, c.cmd.Stderr = logf, logf
	proc.Tie(c.cmd, syscall.SIGQUIT)
	exited, err := proc.Spawn(c.cmd)
	if err != nil {
		close(c.done)
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	go func() { <-exited; close(c.done) }()
	return nil
}

// command runs name in the cluster dir, as nobody when the caller is root.
func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.dir
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + c.dir, "LC_ALL=C.UTF-8"}
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	if os.Geteuid() == 0 {
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: nobody, Gid: nobody}
	}
	return cmd
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "postgres.log") }

// waitReady polls until the server accepts a query. Generous: initdb and the first
// start are slow on a loaded two-core machine.
func (c *Cluster) waitReady() error {
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.done:
			return fmt.Errorf("pgtest: postgres exited: %s", c.Log())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pgtest: postgres not ready: %w\n%s", err, c.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// URL is a connection URL for database db over the cluster's unix socket.
func (c *Cluster) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(Superuser), Path: "/" + db, RawQuery: url.Values{"host": {c.dir}}.Encode()}
	return u.String()
}

// NewDB creates an empty database and returns its URL.
func (c *Cluster) NewDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("t%d", c.dbs.Add(1))
	db, err := sql.Open("pgx", c.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec(`CREATE DATABASE ` + name); err != nil {
		t.Fatalf("pgtest: create database %s: %v", name, err)
	}
	return c.URL(name)
}

// Log is the server's log so far, for a failure message.
func (c *Cluster) Log() string {
	b, _ := os.ReadFile(c.logFile())
	return strings.TrimSpace(string(b))
}

// Stop shuts the server down (fast: open sessions are ended) and removes its dir.
func (c *Cluster) Stop() {
	if c.cmd != nil && c.cmd.Process != nil {
		c.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-c.done:
		case <-time.After(time.Minute):
			c.cmd.Process.Kill()
			<-c.done
		}
	}
	if err := os.RemoveAll(c.dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(os.Stderr, "pgtest:", err)
	}
}
