package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/crackbox/crackbox/internal/eventually"
)

// Readers page messages by id > cursor, so an id must never become visible before
// a smaller one still being written: a writer holding an uncommitted message keeps
// PutMessage out until it commits.
func TestMessageIDsVisibleInOrder(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		inbound(t, s, Message{ChatJID: "c", Text: "first"})
		tx, err := s.sql.BeginTx(ctx, s.d.txOptions)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback()
		var early int64
		if err := (conn{tx, s.d}).QueryRowContext(ctx, `INSERT INTO messages (chat_jid, text, created_at) VALUES ('c', 'early', 0) RETURNING id`).Scan(&early); err != nil {
			t.Fatal(err)
		}
		var committed atomic.Bool
		type put struct {
			m         Message
			err       error
			committed bool
		}
		done := make(chan put, 1)
		go func() {
			m, _, err := s.PutMessage(ctx, Message{ChatJID: "c", Text: "late"})
			done <- put{m, err, committed.Load()}
		}()
		// Commit only once PutMessage is seen waiting for the lock, so one that does
		// not wait has finished by then.
		eventually.True(t, time.Minute, "PutMessage waits for the writer holding the messages", func() bool {
			select {
			case p := <-done:
				done <- p // it finished without waiting: the check below reports it
				return true
			default:
			}
			return waitingOnLock(t, s)
		})
		committed.Store(true)
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		p := <-done
		if p.err != nil {
			t.Fatal(p.err)
		}
		if !p.committed {
			t.Fatalf("message %d committed while %d, a smaller id, was still being written", p.m.ID, early)
		}
		if p.m.ID <= early {
			t.Fatalf("late message got id %d, not after %d", p.m.ID, early)
		}
	})
}

// waitingOnLock reports whether a statement of s waits for a lock another
// transaction holds: PostgreSQL lists it as an ungranted lock on messages; SQLite,
// whose wait is its busy handler retrying, shows that call in a goroutine's stack.
func waitingOnLock(t *testing.T, s *Store) bool {
	t.Helper()
	if s.d.dollar {
		var n int
		err := s.sql.QueryRowContext(context.Background(), `SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
			WHERE c.relname = 'messages' AND NOT l.granted`).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		return n > 0
	}
	buf := make([]byte, 1<<20)
	return bytes.Contains(buf[:runtime.Stack(buf, true)], []byte("_sqlite3InvokeBusyHandler"))
}

// Many writers adding the same folder: exactly one wins, the rest get ErrExists.
func TestConcurrentInsertFolder(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		const n = 8
		errs := make(chan error, n)
		var wg sync.WaitGroup
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- s.InsertFolder(context.Background(), Folder{Path: "corp"}, "")
			}()
		}
		wg.Wait()
		close(errs)
		won := 0
		for err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, ErrExists):
				t.Errorf("loser got %v, want ErrExists", err)
			}
		}
		if won != 1 {
			t.Fatalf("%d writers added the folder, want 1", won)
		}
	})
}

// A child added while its parent is deleted: one of the two loses, never both win
// (which would leave a folder whose parent is gone).
func TestChildRacesParentDelete(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		for i := range 15 {
			parent := fmt.Sprintf("p%d", i)
			folders(t, s, parent)
			var addErr, delErr error
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); addErr = s.InsertFolder(ctx, Folder{Path: parent + "/c"}, parent) }()
			go func() { defer wg.Done(); delErr = s.DeleteFolder(ctx, parent) }()
			wg.Wait()
			switch {
			case addErr == nil && errors.Is(delErr, ErrHasChildren):
			case delErr == nil && errors.Is(addErr, ErrNoParent):
			default:
				t.Fatalf("round %d: add = %v, delete = %v; want exactly one to lose", i, addErr, delErr)
			}
		}
	})
}
