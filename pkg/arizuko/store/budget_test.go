package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// The budget counts turns that started a guest within the window, per
// folder, leaving out the turn being checked and turns that never started.
func TestTurnsStartedSince(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		for _, f := range []string{"a", "b"} {
			if err := s.InsertFolder(ctx, Folder{Path: f}, ""); err != nil {
				t.Fatal(err)
			}
		}
		day := 24 * time.Hour
		at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
		since := at.Add(-day).UnixMilli()
		ms := func(d time.Duration) int64 { return at.Add(d).UnixMilli() }
		// id 1..: started_at relative to at; 0 = never started (a refused turn).
		turns := []struct {
			folder  string
			started int64
		}{
			{"a", ms(-25 * time.Hour)},         // 1: outside
			{"a", since},                       // 2: exactly at the edge: inside
			{"a", ms(-time.Hour)},              // 3: inside
			{"a", 0},                           // 4: never started
			{"b", ms(-time.Minute)},            // 5: other folder
			{"a", ms(-day + time.Millisecond)}, // 6: inside
			{"a", since - 1},                   // 7: one millisecond outside
		}
		for _, x := range turns {
			if _, err := s.db.ExecContext(ctx, `INSERT INTO turns (folder, status, started_at, created_at) VALUES (?, 'done', ?, 0)`, x.folder, x.started); err != nil {
				t.Fatal(err)
			}
		}
		for _, c := range []struct {
			name    string
			folder  string
			since   int64
			exclude int64
			want    int
		}{
			{"window", "a", since, 0, 3},
			{"excludes the checked turn", "a", since, 3, 2},
			{"exclude of an outside turn changes nothing", "a", since, 1, 3},
			{"other folder", "b", since, 0, 1},
			{"wider window", "a", ms(-48 * time.Hour), 0, 5},
			{"window after everything", "a", ms(time.Second), 0, 0},
			{"unknown folder", "zz", since, 0, 0},
		} {
			t.Run(c.name, func(t *testing.T) {
				got, err := s.TurnsStartedSince(ctx, c.folder, c.since, c.exclude)
				if err != nil || got != c.want {
					t.Fatalf("TurnsStartedSince(%q, %d, %d) = %d, %v; want %d", c.folder, c.since, c.exclude, got, err, c.want)
				}
			})
		}
	})
}

func TestTurnBudgetSetting(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if err := s.InsertFolder(ctx, Folder{Path: "a"}, ""); err != nil {
			t.Fatal(err)
		}
		check := func(wantN int, wantSet bool) {
			t.Helper()
			n, set, err := s.TurnBudget(ctx, "a")
			if err != nil || n != wantN || set != wantSet {
				t.Fatalf("TurnBudget = %d, %v, %v; want %d, %v", n, set, err, wantN, wantSet)
			}
		}
		check(0, false)
		for _, c := range []struct {
			set     int
			wantN   int
			wantSet bool
		}{{5, 5, true}, {0, 0, true}, {-1, 0, false}} {
			if err := s.SetTurnBudget(ctx, "a", c.set); err != nil {
				t.Fatal(err)
			}
			check(c.wantN, c.wantSet)
		}
		if err := s.SetTurnBudget(ctx, "nope", 3); !errors.Is(err, ErrNotFound) {
			t.Fatalf("budget of a missing folder: %v", err)
		}
		if _, _, err := s.TurnBudget(ctx, "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("budget of a missing folder: %v", err)
		}
	})
}
