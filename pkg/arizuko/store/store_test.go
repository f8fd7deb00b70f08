package store

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/crackbox/crackbox/pkg/arizuko/acl"
	"github.com/crackbox/crackbox/pkg/router"
)

func tables(t *testing.T, s *Store) []string {
	t.Helper()
	q := `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`
	if s.Dialect() == "postgres" {
		q = `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name COLLATE "C"`
	}
	out, err := queryAll(context.Background(), s.db, scanString, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMigrateFromEmpty(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if v, err := s.Version(ctx); err != nil || v != LatestVersion() || v < 2 {
			t.Fatalf("version = %d, %v; latest %d", v, err, LatestVersion())
		}
		want := []string{"acl", "acl_membership", "adapters", "api_tokens", "audit_log", "chats", "folders", "hooks", "messages", "network_rules",
			"observers", "routes", "schedules", "schema_version", "secrets", "sessions", "turn_outputs", "turns"}
		if got := tables(t, s); !reflect.DeepEqual(got, want) {
			t.Fatalf("tables = %v\nwant %v", got, want)
		}
		if b.name == "sqlite" {
			var fk int
			s.db.QueryRowContext(ctx, `PRAGMA foreign_keys`).Scan(&fk)
			var mode string
			s.db.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode)
			if fk != 1 || mode != "wal" {
				t.Fatalf("foreign_keys=%d journal_mode=%s", fk, mode)
			}
		}
		// Seed rows equal acl.Seeds.
		rows, err := s.ListGrants(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		for i := range rows {
			rows[i].ID = 0
		}
		if !reflect.DeepEqual(rows, acl.Seeds) {
			t.Fatalf("seed rows %+v\nwant %+v", rows, acl.Seeds)
		}
	})
}

// TestMigrateFromEachVersion stops at every earlier version with data in the
// tables that version has, then opens with the full binary.
func TestMigrateFromEachVersion(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		ctx := context.Background()
		for v := 1; v < LatestVersion(); v++ {
			path := b.newDB(t)
			old, err := b.openAt(t, path, v)
			if err != nil {
				t.Fatal(err)
			}
			if got, _ := old.Version(ctx); got != v {
				t.Fatalf("stopped at %d, want %d", got, v)
			}
			if err := insertOldFolder(ctx, old, "corp"); err != nil {
				t.Fatal(err)
			}
			if _, _, err := old.PutMessage(ctx, Message{ChatJID: "c1", Text: "before upgrade"}); err != nil && v >= 2 {
				t.Fatal(err)
			} else if err != nil {
				// PutMessage reads columns added later; write the v1 shape directly.
				if _, err := old.db.ExecContext(ctx, `INSERT INTO chats (jid, created_at) VALUES ('c1', 0)`); err != nil {
					t.Fatal(err)
				}
				if _, err := old.db.ExecContext(ctx, `INSERT INTO messages (chat_jid, text, created_at) VALUES ('c1', 'before upgrade', 0)`); err != nil {
					t.Fatal(err)
				}
			}
			old.Close()

			s, err := b.openAt(t, path, 0)
			if err != nil {
				t.Fatalf("from v%d: %v", v, err)
			}
			if got, _ := s.Version(ctx); got != LatestVersion() {
				t.Fatalf("from v%d: at %d", v, got)
			}
			msgs, err := s.ListMessages(ctx, "c1", 0, 10)
			if err != nil || len(msgs) != 1 || msgs[0].Text != "before upgrade" || msgs[0].Direction != "in" {
				t.Fatalf("from v%d: messages %+v, %v", v, msgs, err)
			}
			if _, err := s.GetFolder(ctx, "corp"); err != nil {
				t.Fatal(err)
			}
			s.Close()
		}
	})
}

func TestSchemaTooNew(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		path := b.newDB(t)
		s, err := b.openAt(t, path, 0)
		if err != nil {
			t.Fatal(err)
		}
		s.db.ExecContext(context.Background(), `INSERT INTO schema_version (version, name, applied_at) VALUES (?, 'future', 0)`, LatestVersion()+1)
		s.Close()
		_, err = b.openAt(t, path, 0)
		if !errors.Is(err, ErrSchemaTooNew) {
			t.Fatalf("err = %v, want ErrSchemaTooNew", err)
		}
	})
}

func TestFoldersTree(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if err := s.InsertFolder(ctx, Folder{Path: "corp/eng"}, "corp"); !errors.Is(err, ErrNoParent) {
			t.Fatalf("no parent: %v", err)
		}
		for _, f := range []struct{ path, parent string }{{"corp", ""}, {"corp/eng", "corp"}, {"corp/eng/sre", "corp/eng"}, {"corp/engx", "corp"}, {"corp_x", ""},
			{"corp/Eng", "corp"}, {"corp/Eng/x", "corp/Eng"}} {
			if err := s.InsertFolder(ctx, Folder{Path: f.path, AgentCommand: []string{"agent", "--x"}}, f.parent); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.InsertFolder(ctx, Folder{Path: "corp"}, ""); !errors.Is(err, ErrExists) {
			t.Fatalf("dup: %v", err)
		}
		if err := s.DeleteFolder(ctx, "corp/eng"); !errors.Is(err, ErrHasChildren) {
			t.Fatalf("delete with children: %v", err)
		}
		// corp/engx and corp/Eng/x are not children of corp/eng (in byte order, whatever
		// the database's locale), and '_' / '%' are not wildcards.
		if _, err := s.InsertGrant(ctx, acl.Grant{Principal: "folder:corp/eng/sre", Action: "mcp:send", Scope: "corp", Effect: acl.Allow}); err != nil {
			t.Fatal(err)
		}
		if err := s.PutSecret(ctx, SecretRow{ScopeKind: "folder", ScopeID: "corp/eng/sre", Name: "K", Value: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteFolder(ctx, "corp/eng/sre"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteFolder(ctx, "corp/eng"); err != nil {
			t.Fatalf("corp/engx or corp/Eng/x counted as a child: %v", err)
		}
		if g, _ := s.ListGrants(ctx, "folder:corp/eng/sre"); len(g) != 0 {
			t.Fatalf("grants of a deleted folder kept: %+v", g)
		}
		if n, _ := s.ListSecretNames(ctx, "folder", "corp/eng/sre"); len(n) != 0 {
			t.Fatalf("secrets of a deleted folder kept: %+v", n)
		}
		if err := s.DeleteFolder(ctx, "corp/eng"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
		f, err := s.GetFolder(ctx, "corp")
		if err != nil || !reflect.DeepEqual(f.AgentCommand, []string{"agent", "--x"}) {
			t.Fatalf("get: %+v %v", f, err)
		}
		p, _ := s.Policy(ctx)
		if !p.Decide("folder:corp", "mcp:reply", "corp").Allow {
			t.Fatal("new folder is not a member")
		}
		if p.Decide("folder:corp/eng", "mcp:reply", "corp/eng").Allow {
			t.Fatal("deleted folder kept its membership")
		}
	})
}

func TestPutMessageDedup(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		a, dup, err := s.PutMessage(ctx, Message{ChatJID: "tg:1", PlatformID: "p1", Text: "hi", Folder: "corp"})
		if err != nil || dup {
			t.Fatal(err, dup)
		}
		again, dup, err := s.PutMessage(ctx, Message{ChatJID: "tg:1", PlatformID: "p1", Text: "hi again"})
		if err != nil || !dup || again.ID != a.ID || again.Text != "hi" {
			t.Fatalf("dup = %v %+v %v", dup, again, err)
		}
		if _, dup, _ := s.PutMessage(ctx, Message{ChatJID: "tg:1", Text: "no id"}); dup {
			t.Fatal("empty platform id deduplicated")
		}
		if _, dup, _ := s.PutMessage(ctx, Message{ChatJID: "tg:1", Text: "no id"}); dup {
			t.Fatal("empty platform id deduplicated")
		}
		if n, _ := s.CountMessages(ctx); n != 3 {
			t.Fatalf("count = %d", n)
		}
		if err := s.AdvanceCursor(ctx, "tg:1", 2); err != nil {
			t.Fatal(err)
		}
		s.AdvanceCursor(ctx, "tg:1", 1)
		if err := s.SetEngagement(ctx, "tg:1", "corp", "t", 42); err != nil {
			t.Fatal(err)
		}
		c, err := s.GetChat(ctx, "tg:1")
		if err != nil || c.AgentCursor != 2 || c.EngagedFolder != "corp" || c.EngagedAt != 42 {
			t.Fatalf("chat %+v %v", c, err)
		}
	})
}

func TestRoutesAndGrants(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		r2, _ := s.InsertRoute(ctx, router.Route{Seq: 20, Target: "b"})
		r1, _ := s.InsertRoute(ctx, router.Route{Seq: 10, Match: "platform=tg", Target: "a"})
		rs, err := s.ListRoutes(ctx)
		if err != nil || len(rs) != 2 || rs[0].ID != r1.ID || rs[1].ID != r2.ID {
			t.Fatalf("routes %+v %v", rs, err)
		}
		g := acl.Grant{Principal: "user:a", Action: "mcp:*", Scope: "x/**", Effect: acl.Allow}
		if _, err := s.InsertGrant(ctx, g); err != nil {
			t.Fatal(err)
		}
		if _, err := s.InsertGrant(ctx, g); !errors.Is(err, ErrExists) {
			t.Fatalf("dup grant: %v", err)
		}
		if err := s.InsertEdge(ctx, acl.Edge{Member: "user:a", Role: "role:x"}, "t"); err != nil {
			t.Fatal(err)
		}
		if err := s.Audit(ctx, acl.Decision{Principal: "user:a", Action: "x", Scope: "y", Reason: "r"}); err != nil {
			t.Fatal(err)
		}
		au, _ := s.ListAudit(ctx, 10)
		if len(au) != 1 || au[0].Decision != "deny" {
			t.Fatalf("audit %+v", au)
		}
		if err := s.SetNetworkRule(ctx, NetworkRule{Folder: "nope", Host: "a.com", Effect: "allow"}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("rule on missing folder: %v", err)
		}
	})
}

// A folder re-created under a removed one's name must not receive the old
// tenant's chats, so deleting a folder takes the routes and engagements that
// reach it or below it, and no others whose names merely share its prefix.
func TestDeleteFolderTakesItsRoutesAndEngagements(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "users", "users/alice", "users/alice2", "users/alice-x")
		gone := []string{"users/alice", "users/alice#work", "users/alice/{sender}", "users/alice/bot#observe"}
		kept := []string{"users", "users/{sender}", "users/alice2", "users/alice-x#work", "users/alice2/{sender}"}
		for i, target := range append(append([]string{}, gone...), kept...) {
			if _, err := s.InsertRoute(ctx, router.Route{Seq: i, Match: "chat_jid=tg:" + target, Target: target}); err != nil {
				t.Fatal(err)
			}
		}
		engaged := map[string]string{"tg:1": "users/alice", "tg:2": "users/alice/bot", "tg:3": "users/alice2", "tg:4": "users"}
		for jid, f := range engaged {
			if _, _, err := s.PutMessage(ctx, Message{ChatJID: jid, Platform: "tg", Text: "hi", Folder: f}); err != nil {
				t.Fatal(err)
			}
			if err := s.SetEngagement(ctx, jid, f, "t", 1); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteFolder(ctx, "users/alice"); err != nil {
			t.Fatal(err)
		}
		rs, err := s.ListRoutes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			got = append(got, r.Target)
		}
		if !reflect.DeepEqual(got, kept) {
			t.Fatalf("routes left %v, want %v", got, kept)
		}
		for jid, f := range engaged {
			c, err := s.GetChat(ctx, jid)
			if err != nil {
				t.Fatal(err)
			}
			want := f
			if f == "users/alice" || f == "users/alice/bot" {
				want = ""
			}
			if c.EngagedFolder != want || (want == "" && (c.EngagedTopic != "" || c.EngagedAt != 0)) {
				t.Errorf("chat %s engaged with %q topic %q at %d, want %q", jid, c.EngagedFolder, c.EngagedTopic, c.EngagedAt, want)
			}
		}
	})
}

// A folder re-created under a removed folder's name does not inherit its history:
// no unclaimed message of the old tenant becomes its work, no old turn is listed,
// and none comes back when the daemon requeues failed turns. The rows stay for the
// operator. An open turn stays for the queue to fail and report.
func TestDeleteFolderRetiresItsHistory(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "users", "users/alice", "users/alice2", "users/bob")
		put := func(folder, text string) Message {
			m, _, err := s.PutMessage(ctx, Message{ChatJID: "tg:" + folder, Platform: "tg", Text: text, Folder: folder})
			if err != nil {
				t.Fatal(err)
			}
			return m
		}
		claimed := put("users/alice", "my bank PIN is 1234")
		done, err := s.CreateTurn(ctx, "users/alice", "", claimed.ID, claimed.ID)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.FinishTurn(ctx, done.ID, TurnEnd{Status: TurnFailed, Outcome: "secrets-unavailable"}); err != nil {
			t.Fatal(err)
		}
		put("users/alice", "and my password is hunter2") // unclaimed
		put("users/alice2", "a neighbour's message")
		waiting := put("users/bob", "bob's queued question")
		open, err := s.CreateTurn(ctx, "users/bob", "", waiting.ID, waiting.ID)
		if err != nil {
			t.Fatal(err)
		}
		before, err := s.CountMessages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"users/alice", "users/bob"} {
			if err := s.DeleteFolder(ctx, f); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.InsertFolder(ctx, Folder{Path: "users/alice"}, "users"); err != nil {
			t.Fatal(err)
		}
		if n, err := s.RequeueTurns(ctx, "secrets-unavailable"); err != nil || n != 0 {
			t.Errorf("requeued %d turns (%v), want none of a removed folder's", n, err)
		}
		work, err := s.PendingWork(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := []WorkKey{{Folder: "users/alice2"}, {Folder: "users/bob"}}; !reflect.DeepEqual(work, want) {
			t.Errorf("pending work %v, want %v (bob's open turn stays for the queue)", work, want)
		}
		if ms, err := s.PendingInbound(ctx, "users/alice", "", 0); err != nil || len(ms) != 0 {
			t.Errorf("the new folder's pending messages: %v %v, want none", ms, err)
		}
		if ts, err := s.ListTurns(ctx, "users/alice", 0); err != nil || len(ts) != 0 {
			t.Errorf("the new folder lists turns %v %v, want none", ts, err)
		}
		if ts, err := s.OpenTurns(ctx, "users/bob"); err != nil || len(ts) != 1 || ts[0].ID != open.ID {
			t.Errorf("bob's open turn: %v %v, want it kept for the queue", ts, err)
		}
		if ms, err := s.TurnMessages(ctx, open); err != nil || len(ms) != 1 {
			t.Errorf("bob's open turn's messages: %v %v, want its one message", ms, err)
		}
		all, err := s.ListTurns(ctx, "", 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, tr := range all {
			if tr.ID == done.ID && !strings.HasPrefix(tr.Folder, RemovedPrefix) {
				t.Errorf("alice's old turn is under %q, want it under %s", tr.Folder, RemovedPrefix)
			}
		}
		if after, err := s.CountMessages(ctx); err != nil || after != before {
			t.Errorf("%d messages after the removal, want all %d kept (%v)", after, before, err)
		}
	})
}

// What other principals were granted on a removed folder alone does not pass to
// the next folder of that name; grants on wider scopes stay.
func TestDeleteFolderTakesGrantsOnItAlone(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "users", "users/alice", "users/alice2")
		kept := []string{"users/**", "users/alice2", "users/alice-x/**", "*"}
		for _, scope := range append([]string{"users/alice", "users/alice/**", "users/alice/sub"}, kept...) {
			if _, err := s.InsertGrant(ctx, acl.Grant{Principal: "user:old-admin", Action: "mcp:*", Scope: scope, Effect: acl.Allow}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.DeleteFolder(ctx, "users/alice"); err != nil {
			t.Fatal(err)
		}
		gs, err := s.ListGrants(ctx, "user:old-admin")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, g := range gs {
			got = append(got, g.Scope)
		}
		if !reflect.DeepEqual(got, kept) {
			t.Fatalf("grants left on %v, want %v", got, kept)
		}
	})
}

// insertOldFolder writes a folder row in the columns every schema version
// has, for a store stopped at an earlier version than InsertFolder writes.
func insertOldFolder(ctx context.Context, s *Store, path string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO folders (path, created_at) VALUES (?, 0)`, path)
	return err
}
