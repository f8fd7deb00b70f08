package store

import (
	"context"
	"errors"
	"reflect"
	"testing"
)

func TestSessions(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a")
		if _, err := s.GetSession(ctx, "a", ""); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no session yet: %v", err)
		}
		x, err := s.EnsureSession(ctx, "a", "", "first")
		if err != nil || x.SessionID != "first" {
			t.Fatalf("ensure %+v %v", x, err)
		}
		// A second turn keeps the session: the agent resumes its conversation.
		if x, _ := s.EnsureSession(ctx, "a", "", "second"); x.SessionID != "first" {
			t.Fatalf("session replaced by %q", x.SessionID)
		}
		if _, err := s.EnsureSession(ctx, "nope", "", "x"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("session of a missing folder: %v", err)
		}
		fork := Session{Folder: "a", Topic: "side", SessionID: "forked", ParentTopic: ""}
		if err := s.InsertSession(ctx, fork); err != nil {
			t.Fatal(err)
		}
		if err := s.InsertSession(ctx, fork); !errors.Is(err, ErrExists) {
			t.Fatalf("fork onto an existing topic: %v, want ErrExists", err)
		}
		if got, _ := s.GetSession(ctx, "a", "side"); got != fork {
			t.Fatalf("forked %+v", got)
		}
	})
}

func TestObservers(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		folders(t, s, "a", "b", "c")
		for _, src := range []string{"c", "b", "b"} { // a repeat is a no-op
			if err := s.AddObserver(ctx, "a", src); err != nil {
				t.Fatal(err)
			}
		}
		if obs, err := s.Observed(ctx, "a"); err != nil || !reflect.DeepEqual(obs, []string{"b", "c"}) {
			t.Fatalf("observed %v %v", obs, err)
		}
		if err := s.AddObserver(ctx, "a", "nope"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("observe a missing folder: %v", err)
		}
		if err := s.RemoveObserver(ctx, "a", "b"); err != nil {
			t.Fatal(err)
		}
		if err := s.RemoveObserver(ctx, "a", "b"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("remove twice: %v", err)
		}
		if obs, _ := s.Observed(ctx, "a"); !reflect.DeepEqual(obs, []string{"c"}) {
			t.Fatalf("observed %v", obs)
		}
	})
}

func TestAdapters(t *testing.T) {
	each(t, func(t *testing.T, b backend) {
		s := openT(t, b)
		ctx := context.Background()
		if _, err := s.GetAdapter(ctx, "tg"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("no adapter: %v", err)
		}
		for _, u := range []string{"http://127.0.0.1:1/old", "http://127.0.0.1:1/new"} {
			if err := s.SetAdapter(ctx, Adapter{Platform: "tg", CallbackURL: u}); err != nil {
				t.Fatal(err)
			}
		}
		if a, err := s.GetAdapter(ctx, "tg"); err != nil || a.CallbackURL != "http://127.0.0.1:1/new" {
			t.Fatalf("adapter %+v %v", a, err)
		}
		if err := s.DeleteAdapter(ctx, "tg"); err != nil {
			t.Fatal(err)
		}
		if err := s.DeleteAdapter(ctx, "tg"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("delete twice: %v", err)
		}
	})
}
