package store

import (
	"context"
	"crypto/sha256"
	"errors"
	"testing"
)

// Hooks and schedules on both engines: a hook is found by its token's sum
// only, says whether it is signed, and is gone once deleted; a schedule's
// due time is won by one compare-and-set; both refuse a missing folder and
// go with their folder.
func TestHooksAndSchedules(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if err := s.InsertFolder(ctx, Folder{Path: "acme"}, ""); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte("azh_x"))
		h, err := s.InsertHook(ctx, Hook{Folder: "acme", PerMinute: 5, Owner: "user:admin"}, sum[:], []byte("sealed"))
		if err != nil {
			t.Fatal(err)
		}
		other := sha256.Sum256([]byte("azh_y"))
		if _, err := s.InsertHook(ctx, Hook{Folder: "acme", PerMinute: 5, Owner: "user:admin"}, other[:], nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.HookBySum(ctx, sum[:])
		if err != nil || got.ID != h.ID || !got.Signed || string(got.Sealed) != "sealed" || got.PerMinute != 5 {
			t.Fatalf("HookBySum %+v %v", got, err)
		}
		if hs, err := s.ListHooks(ctx); err != nil || len(hs) != 2 || !hs[0].Signed || hs[1].Signed {
			t.Fatalf("ListHooks %+v %v", hs, err)
		}
		if _, err := s.InsertHook(ctx, Hook{Folder: "nosuch", PerMinute: 1}, []byte("z"), nil); !errors.Is(err, ErrNotFound) {
			t.Fatalf("hook into a missing folder: %v", err)
		}
		if err := s.DeleteHook(ctx, h.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := s.HookBySum(ctx, sum[:]); !errors.Is(err, ErrNotFound) {
			t.Fatalf("deleted hook: %v", err)
		}

		sc, err := s.InsertSchedule(ctx, Schedule{Folder: "acme", Cron: "@hourly", TZ: "UTC", Prompt: "p", NextRun: 1000, Owner: "user:admin"})
		if err != nil {
			t.Fatal(err)
		}
		if at, ok, err := s.NextScheduleRun(ctx); err != nil || !ok || at != 1000 {
			t.Fatalf("NextScheduleRun %d %v %v", at, ok, err)
		}
		if due, err := s.DueSchedules(ctx, 999); err != nil || len(due) != 0 {
			t.Fatalf("due before its time: %+v %v", due, err)
		}
		if due, err := s.DueSchedules(ctx, 1000); err != nil || len(due) != 1 {
			t.Fatalf("due at its time: %+v %v", due, err)
		}
		if won, err := s.AdvanceSchedule(ctx, sc.ID, 1000, 2000); err != nil || !won {
			t.Fatalf("first advance %v %v", won, err)
		}
		if won, err := s.AdvanceSchedule(ctx, sc.ID, 1000, 2000); err != nil || won {
			t.Fatalf("second advance of the same due time won: %v %v", won, err)
		}
		if got, err := s.GetSchedule(ctx, sc.ID); err != nil || got.NextRun != 2000 || got.LastRun != 1000 {
			t.Fatalf("after the advance %+v %v", got, err)
		}
		if _, err := s.InsertSchedule(ctx, Schedule{Folder: "nosuch", Cron: "@daily", TZ: "UTC", Prompt: "p", NextRun: 1}); !errors.Is(err, ErrNotFound) {
			t.Fatalf("schedule into a missing folder: %v", err)
		}
		if err := s.DeleteFolder(ctx, "acme"); err != nil {
			t.Fatal(err)
		}
		hs, _ := s.ListHooks(ctx)
		ss, _ := s.ListSchedules(ctx)
		if len(hs) != 0 || len(ss) != 0 {
			t.Fatalf("after the folder's removal: hooks %+v schedules %+v", hs, ss)
		}
		if _, ok, err := s.NextScheduleRun(ctx); ok || err != nil {
			t.Fatalf("NextScheduleRun of none: %v %v", ok, err)
		}
	})
}
