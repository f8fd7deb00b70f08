package pgtest

import (
	"sync"
	"testing"
)

// One cluster per test binary: initdb costs seconds, a database a fraction of one.
var shared struct {
	sync.Mutex
	main bool // Main is running the tests
	c    *Cluster
	err  error
}

// Main runs the package's tests and then stops the shared cluster, if a test started
// one. Use it as TestMain (os.Exit(pgtest.Main(m))) in a package that calls DB.
func Main(m *testing.M) int {
	shared.Lock()
	shared.main = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	defer shared.Unlock()
	if shared.c != nil {
		shared.c.Stop()
		shared.c = nil
	}
	return code
}

// DB returns the URL of a new, empty database on the test binary's shared cluster,
// starting the cluster on first use.
func DB(t testing.TB) string {
	t.Helper()
	bin := binDir(t)
	shared.Lock()
	if !shared.main {
		shared.Unlock()
		t.Fatal("pgtest.DB needs the shared cluster's owner: add func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }")
	}
	if shared.c == nil && shared.err == nil {
		shared.c, shared.err = start(bin)
	}
	c, err := shared.c, shared.err
	shared.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	return c.NewDB(t)
}
