package pgtest

import (
	"database/sql"
	"errors"
	"os"
	"syscall"
	"testing"
)

func TestMain(m *testing.M) { os.Exit(Main(m)) }

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// Databases are separate, the server has no TCP listener, runs unprivileged, sorts
// text as a production locale does, and is gone with its files after Stop.
func TestClusterLifecycle(t *testing.T) {
	c := Start(t)
	a, b := open(t, c.NewDB(t)), open(t, c.NewDB(t))
	if _, err := a.Exec(`CREATE TABLE x (v TEXT)`); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(`SELECT * FROM x`); err == nil {
		t.Fatal("a table of one database seen in another")
	}
	var listen string
	if err := a.QueryRow(`SHOW listen_addresses`).Scan(&listen); err != nil || listen != "" {
		t.Fatalf("listen_addresses %q %v, want none", listen, err)
	}
	if fi, err := os.Stat(c.dataDir()); err != nil {
		t.Fatal(err)
	} else if st := fi.Sys().(*syscall.Stat_t); os.Geteuid() == 0 && st.Uid != nobody {
		t.Fatalf("data dir owned by uid %d, want %d", st.Uid, nobody)
	}
	// ICU en-US sorts "a" before "B"; byte order (C, SQLite) the other way round.
	var less bool
	if err := a.QueryRow(`SELECT 'B' < 'a'`).Scan(&less); err != nil || less {
		t.Fatalf("'B' < 'a' = %v %v; want false under a locale collation", less, err)
	}
	a.Close()
	b.Close()
	c.Stop()
	if _, err := os.Stat(c.dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("cluster dir left behind: %v", err)
	}
	if err := c.cmd.Process.Signal(syscall.Signal(0)); err == nil {
		t.Fatal("postgres still running after Stop")
	}
}

func TestSharedDB(t *testing.T) {
	u1, u2 := DB(t), DB(t)
	if u1 == u2 {
		t.Fatal("two DB calls returned one database")
	}
	var one int
	if err := open(t, u2).QueryRow(`SELECT 1`).Scan(&one); err != nil || one != 1 {
		t.Fatal(one, err)
	}
}
