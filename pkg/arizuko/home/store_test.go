package home

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/crackbox/crackbox/internal/natstest"
)

func newStore(t *testing.T) *Store {
	t.Helper()
	js, err := jetstream.New(natstest.Start(t, 1).Connect())
	if err != nil {
		t.Fatal(err)
	}
	s, err := Ensure(context.Background(), js, 1, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Commits make numbered versions per folder; a restore commits an old
// manifest again; a manifest bigger than a chunk round-trips.
func TestStoreCommitLogRestore(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	src := sample(t)
	m1, _, _, err := Scan(src, nil, Limits{}, func(h string, b []byte) error { _, err := s.PutChunk(ctx, b); return err })
	if err != nil {
		t.Fatal(err)
	}
	v1, err := s.Commit(ctx, "acme", m1, Version{Source: "push"})
	if err != nil {
		t.Fatal(err)
	}
	// A manifest of many entries spans several chunks.
	var m2 Manifest
	for i := range 20000 {
		m2.Entries = append(m2.Entries, file(fmt.Sprintf("f%06d", i), 1, hA))
	}
	v2, err := s.Commit(ctx, "acme", m2, Version{Source: "turn", Turn: 7, Attempt: 2})
	if err != nil {
		t.Fatal(err)
	}
	if v1.N != 1 || v2.N != 2 || len(v2.Manifest) < 2 || v2.Changed != len(m1.Entries)+20000 {
		t.Errorf("versions %d, %d (manifest in %d chunks, %d changed)", v1.N, v2.N, len(v2.Manifest), v2.Changed)
	}
	if g, err := s.Manifest(ctx, v2); err != nil || g.Hash() != m2.Hash() {
		t.Fatalf("manifest of v2: %v", err)
	}
	if _, err := s.Commit(ctx, "globex", m2, Version{Source: "push"}); err != nil {
		t.Fatal(err)
	}
	v3, err := s.Restore(ctx, "acme", 1)
	if err != nil || v3.N != 3 || v3.Hash != v1.Hash || v3.From != 1 {
		t.Fatalf("restore: %+v %v", v3, err)
	}
	if _, err := s.Restore(ctx, "acme", 9); !errors.Is(err, ErrNoVersion) {
		t.Errorf("restore of a missing version: %v", err)
	}
	l, err := s.Log(ctx, "acme")
	if err != nil || len(l.Versions) != 3 {
		t.Fatalf("log %+v %v", l, err)
	}
	if g, _ := s.Log(ctx, "globex"); len(g.Versions) != 1 || g.Versions[0].N != 1 {
		t.Errorf("globex log %+v: numbered on its own", g)
	}
}

func TestRetention(t *testing.T) {
	now := time.Now()
	var vs []Version
	for i := 1; i <= 10; i++ {
		vs = append(vs, Version{N: i, Time: now.Add(-time.Duration(11-i) * time.Hour)})
	}
	for _, c := range []struct {
		r    Retention
		want []int
	}{
		{Retention{Keep: 3, Age: time.Minute}, []int{8, 9, 10}},
		{Retention{Keep: 1, Age: 150 * time.Minute}, []int{9, 10}},
		{Retention{Keep: 1, Age: time.Nanosecond}, []int{10}},
		{Retention{}, []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
	} {
		var got []int
		for _, v := range c.r.prune(vs, now) {
			got = append(got, v.N)
		}
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("%+v: kept %v, want %v", c.r, got, c.want)
		}
	}
}

// Chunks of pruned versions go once past the grace; chunks a kept version
// names stay, and so do recent ones no version names yet.
func TestCollect(t *testing.T) {
	ctx := context.Background()
	s := newStore(t)
	s.Retention = Retention{Keep: 1, Age: time.Nanosecond}
	put := func(body string) Manifest {
		h, err := s.PutChunk(ctx, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return Manifest{[]Entry{file("f", int64(len(body)), h)}}
	}
	old := put("old content")
	if _, err := s.Commit(ctx, "acme", old, Version{Source: "push"}); err != nil {
		t.Fatal(err)
	}
	cur := put("current content")
	if _, err := s.Commit(ctx, "acme", cur, Version{Source: "push"}); err != nil {
		t.Fatal(err)
	}
	pending := put("uploaded for a running turn")
	if n, err := s.Collect(ctx, time.Hour); err != nil || n != 0 {
		t.Fatalf("within the grace: removed %d, %v", n, err)
	}
	n, err := s.Collect(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	// The old file's chunk and the old version's manifest chunk, and the
	// pending chunk (past a grace of 0).
	if n != 3 {
		t.Errorf("removed %d chunks, want 3", n)
	}
	for _, c := range []struct {
		m    Manifest
		kept bool
	}{{old, false}, {cur, true}, {pending, false}} {
		ok, err := s.HasChunk(ctx, c.m.Entries[0].Chunks[0])
		if err != nil || ok != c.kept {
			t.Errorf("chunk of %+v kept=%v (%v), want %v", c.m.Entries[0], ok, err, c.kept)
		}
	}
	l, _ := s.Log(ctx, "acme")
	if v, _ := l.Latest(); len(l.Versions) != 1 {
		t.Fatalf("log %+v", l)
	} else if _, err := s.Manifest(ctx, v); err != nil {
		t.Errorf("the kept version's manifest: %v", err)
	}
}
