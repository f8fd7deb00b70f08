package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/router"
)

// A migration that fails leaves the database at the version before it, whole: its
// statements and its schema_version row roll back together, and the error names it.
func TestFailedMigrationRollsBack(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDB(t)
		old, err := b.openAt(t, path, 2)
		if err != nil {
			t.Fatal(err)
		}
		// Migration 3 adds messages.depth; a column already there makes it fail.
		if _, err := old.db.ExecContext(ctx, `ALTER TABLE messages ADD COLUMN depth INTEGER`); err != nil {
			t.Fatal(err)
		}
		old.Close()
		if _, err := b.openAt(t, path, 0); err == nil || !strings.Contains(err.Error(), "0003_message_depth.sql") {
			t.Fatalf("Open = %v, want the failed migration named", err)
		}
		s, err := b.openAt(t, path, 2)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if v, _ := s.Version(ctx); v != 2 {
			t.Fatalf("version %d after a failed migration, want 2", v)
		}
		if _, err := s.db.ExecContext(ctx, `SELECT max_turns_per_day FROM folders`); err == nil {
			t.Fatal("a migration after the failed one ran")
		}
	})
}

// Turns and folders written before the budget migration keep working after it: old
// turns count against the budget by their start, old folders use the default cap.
func TestMigrationKeepsTurnsForTheBudget(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		path := b.newDB(t)
		old, err := b.openAt(t, path, 3)
		if err != nil {
			t.Fatal(err)
		}
		if err := insertOldFolder(ctx, old, "a"); err != nil {
			t.Fatal(err)
		}
		if _, err := old.db.ExecContext(ctx, `INSERT INTO turns (folder, status, started_at, created_at) VALUES ('a', 'done', 1000, 0)`); err != nil {
			t.Fatal(err)
		}
		old.Close()
		s, err := b.openAt(t, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if n, set, err := s.TurnBudget(ctx, "a"); err != nil || set || n != 0 {
			t.Fatalf("budget of an old folder = %d, %v, %v; want the default", n, set, err)
		}
		if n, err := s.TurnsStartedSince(ctx, "a", 500, 0); err != nil || n != 1 {
			t.Fatalf("old turns started = %d, %v; want 1", n, err)
		}
		if ts, err := s.ListTurns(ctx, "a", 10); err != nil || len(ts) != 1 || ts[0].Depth != 0 {
			t.Fatalf("old turn %+v %v", ts, err)
		}
		if b.name == "sqlite" && s.Path() != path {
			t.Fatalf("Path = %s, want %s", s.Path(), path)
		}
	})
}

func TestNetworkRules(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a", "b")
		for _, r := range []NetworkRule{{"b", "x.com", "allow"}, {"a", "y.com", "allow"}, {"a", "x.com", "allow"}, {"a", "x.com", "deny"}} {
			if err := s.SetNetworkRule(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		all, err := s.NetworkRules(ctx)
		want := []NetworkRule{{"a", "x.com", "deny"}, {"a", "y.com", "allow"}, {"b", "x.com", "allow"}}
		if err != nil || len(all) != 3 || all[0] != want[0] || all[1] != want[1] || all[2] != want[2] {
			t.Fatalf("rules %+v %v, want %+v (the effect flipped in place)", all, err, want)
		}
		if b, _ := s.NetworkRules(ctx, "b"); len(b) != 1 || b[0] != want[2] {
			t.Fatalf("rules of b %+v", b)
		}
		if err := s.DeleteNetworkRule(ctx, "a", "x.com"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteNetworkRule(ctx, "a", "x.com"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})
}

func TestGrantEdgeRouteLifecycle(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		g, err := s.InsertGrant(ctx, acl.Grant{Principal: "user:a", Action: "mcp:send", Scope: "x", Effect: acl.Allow})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetGrant(ctx, g.ID); err != nil || got.Principal != "user:a" || got.Action != "mcp:send" {
			t.Fatalf("grant %+v %v", got, err)
		}
		if err := s.DeleteGrant(ctx, g.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetGrant(ctx, g.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted grant: %v", err)
		}
		if err := s.DeleteGrant(ctx, g.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		e := acl.Edge{Member: "user:a", Role: "role:x"}
		if err := s.InsertEdge(ctx, e, "t"); err != nil {
			t.Fatal(err)
		}
		if err := s.InsertEdge(ctx, e, "t"); !errors.Is(err, ErrExists) {
			t.Fatalf("edge twice: %v", err)
		}
		if err := s.DeleteEdge(ctx, e); err != nil {
			t.Fatal(err)
		}
		if edges, _ := s.ListEdges(ctx); len(edges) != 0 {
			t.Fatalf("edges %+v", edges)
		}
		if err := s.DeleteEdge(ctx, e); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete edge twice: %v", err)
		}
		r, _ := s.InsertRoute(ctx, router.Route{Seq: 1, Match: "platform=tg", Target: "a"})
		if got, err := s.GetRoute(ctx, r.ID); err != nil || got.Match != "platform=tg" || got.Target != "a" {
			t.Fatalf("route %+v %v", got, err)
		}
		if err := s.DeleteRoute(ctx, r.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.GetRoute(ctx, r.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted route: %v", err)
		}
		if err := s.DeleteRoute(ctx, r.ID); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete route twice: %v", err)
		}
	})
}

// Resealing is all or nothing: one row that fails leaves every row as it was.
func TestSecretsResealAllOrNothing(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		for _, r := range []SecretRow{{"folder", "a", "K1", []byte("v1"), 0}, {"folder", "a", "K2", []byte("v2"), 0},
			{"global", "", "G", []byte("g"), 0}} {
			if err := s.PutSecret(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		boom := errors.New("boom")
		if _, err := s.ResealSecrets(ctx, func(r SecretRow) ([]byte, error) {
			if r.Name == "K2" {
				return nil, boom
			}
			return []byte("new-" + string(r.Value)), nil
		}); !errors.Is(err, boom) || !strings.Contains(err.Error(), "K2") {
			t.Fatalf("reseal = %v, want boom naming K2", err)
		}
		rows, _ := s.SecretRows(ctx, "", "")
		for _, r := range rows {
			if strings.HasPrefix(string(r.Value), "new-") {
				t.Fatalf("%s resealed by a failed reseal", r.Name)
			}
		}
		n, err := s.ResealSecrets(ctx, func(r SecretRow) ([]byte, error) {
			if r.ScopeKind == "global" {
				return nil, nil // left alone
			}
			return []byte("new-" + string(r.Value)), nil
		})
		if err != nil || n != 2 {
			t.Fatalf("reseal = %d, %v; want 2", n, err)
		}
		a, _ := s.SecretRows(ctx, "folder", "a")
		if len(a) != 2 || string(a[0].Value) != "new-v1" || string(a[1].Value) != "new-v2" {
			t.Fatalf("folder a rows %+v", a)
		}
		if err := s.DeleteSecret(ctx, "folder", "a", "K1"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteSecret(ctx, "folder", "a", "K1"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		if names, _ := s.ListSecretNames(ctx, "", ""); len(names) != 2 {
			t.Fatalf("names %+v", names)
		}
	})
}

func TestListFolders(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "b", "a")
		if err := s.InsertFolder(ctx, Folder{Path: "a/x"}, "a"); err != nil {
			t.Fatal(err)
		}
		fs, err := s.ListFolders(ctx)
		var got []string
		for _, f := range fs {
			got = append(got, f.Path)
		}
		if err != nil || strings.Join(got, " ") != "a a/x b" {
			t.Fatalf("folders %v %v", got, err)
		}
	})
}

// Open logs through the logger it is given: each migration it applies, and on
// PostgreSQL the open itself; a second open applies none.
func TestOpenLogsThroughItsLogger(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		target := b.newDB(t)
		open := func(log *slog.Logger) {
			t.Helper()
			var s *Store
			var err error
			if b.name == "sqlite" {
				s, err = Open(ctx, target, log)
			} else {
				s, err = OpenURL(ctx, target, true, log)
			}
			if err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
		var first, second bytes.Buffer
		open(slog.New(slog.NewTextHandler(&first, nil)))
		open(slog.New(slog.NewTextHandler(&second, nil)))
		if !strings.Contains(first.String(), `level=INFO msg="store migrated" version=1 `) {
			t.Errorf("first open logged %q, want each migration", first.String())
		}
		if strings.Contains(second.String(), "store migrated") {
			t.Errorf("second open logged %q, want no migration", second.String())
		}
		if want := b.name == "postgres"; strings.Contains(second.String(), `msg="store opened"`) != want {
			t.Errorf("second open logged %q; store opened wanted: %v", second.String(), want)
		}
	})
}
