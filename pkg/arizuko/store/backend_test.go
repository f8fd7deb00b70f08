package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/crackbox/crackbox/internal/pgtest"
)

// The PostgreSQL backend's databases live on one throwaway cluster per test run.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// backend is an engine the store runs on; every store test runs once on each.
type backend struct {
	name  string
	newDB func(t testing.TB) string // a fresh, empty database: a file path or a URL
}

var backends = []backend{
	{"sqlite", func(t testing.TB) string { return filepath.Join(t.TempDir(), "arizuko.db") }},
	{"postgres", pgtest.DB},
}

// each runs fn as one subtest per backend.
func each(t *testing.T, fn func(t *testing.T, b backend)) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

// openAt opens the database at target (from newDB), migrated up to upTo (0: latest).
func (b backend) openAt(t testing.TB, target string, upTo int) (*Store, error) {
	t.Helper()
	if b.name == "sqlite" {
		return openSQLite(context.Background(), target, upTo, nil)
	}
	return openPostgres(context.Background(), target, true, upTo, nil)
}

// openT is a fresh store on b, closed when the test ends.
func openT(t testing.TB, b backend) *Store {
	t.Helper()
	s, err := b.openAt(t, b.newDB(t), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
