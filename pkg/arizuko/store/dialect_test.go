package store

import (
	"context"
	"reflect"
	"testing"
)

func TestRebind(t *testing.T) {
	for _, c := range []struct{ in, sqlite, postgres string }{
		{`SELECT 1`, `SELECT 1`, `SELECT 1`},
		{`a = ? AND b = ?`, `a = ? AND b = ?`, `a = $1 AND b = $2`},
		{`x = '?' AND y = ?`, `x = '?' AND y = ?`, `x = '?' AND y = $1`},
		{`x = 'it''s ?' AND y IN (?, ?)`, `x = 'it''s ?' AND y IN (?, ?)`, `x = 'it''s ?' AND y IN ($1, $2)`},
	} {
		if got := sqliteDialect.rebind(c.in); got != c.sqlite {
			t.Errorf("sqlite rebind(%q) = %q, want %q", c.in, got, c.sqlite)
		}
		if got := postgresDialect.rebind(c.in); got != c.postgres {
			t.Errorf("postgres rebind(%q) = %q, want %q", c.in, got, c.postgres)
		}
	}
}

// Both dialects have the same numbered migrations, and once applied the same tables
// with the same columns.
func TestDialectsHaveOneSchema(t *testing.T) {
	lite, err := loadMigrations(sqliteDialect)
	if err != nil {
		t.Fatal(err)
	}
	pg, err := loadMigrations(postgresDialect)
	if err != nil {
		t.Fatal(err)
	}
	var ln, pn []string
	for _, m := range lite {
		ln = append(ln, m.name)
	}
	for _, m := range pg {
		pn = append(pn, m.name)
	}
	if !reflect.DeepEqual(ln, pn) {
		t.Fatalf("sqlite migrations %v\npostgres migrations %v", ln, pn)
	}
	cols := map[string]map[string][]string{}
	each(t, func(t *testing.T, b backend) {
		cols[b.name] = columns(t, openT(t, b))
	})
	if !reflect.DeepEqual(cols["sqlite"], cols["postgres"]) {
		t.Fatalf("columns differ:\nsqlite   %v\npostgres %v", cols["sqlite"], cols["postgres"])
	}
}

// columns maps each table to its column names in declaration order.
func columns(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	ctx := context.Background()
	q := `SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p WHERE m.type = 'table' ORDER BY m.name, p.cid`
	if s.Dialect() == "postgres" {
		q = `SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = current_schema()
			ORDER BY table_name, ordinal_position`
	}
	type col struct{ table, name string }
	rows, err := queryAll(ctx, s.db, func(sc scanner) (col, error) {
		var c col
		err := sc.Scan(&c.table, &c.name)
		return c, err
	}, q)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, c := range rows {
		out[c.table] = append(out[c.table], c.name)
	}
	return out
}
