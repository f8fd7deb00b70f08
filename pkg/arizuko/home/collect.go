package home

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// DefaultCollectGrace is how old an unreferenced chunk must be before
// Collect removes it: a chunk uploaded for a turn still running is named
// by no version yet.
const DefaultCollectGrace = 24 * time.Hour

// Collect removes chunks that no kept version of any folder names (in its
// files or its manifest) and that were stored longer than grace ago. It
// returns how many it removed.
func (s *Store) Collect(ctx context.Context, grace time.Duration) (int, error) {
	live := map[string]bool{}
	keys, err := s.kv.ListKeys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, err
	}
	if keys != nil {
		for k := range keys.Keys() {
			e, err := s.kv.Get(ctx, k)
			if err != nil {
				return 0, fmt.Errorf("home log %s: %w", k, err)
			}
			var l Log
			if err := json.Unmarshal(e.Value(), &l); err != nil {
				return 0, fmt.Errorf("home log %s: %w", k, err)
			}
			for _, v := range l.Versions {
				for _, h := range v.Manifest {
					live[h] = true
				}
				m, err := s.Manifest(ctx, v)
				if err != nil {
					return 0, err
				}
				for _, h := range m.Chunks() {
					live[h] = true
				}
			}
		}
	}
	info, err := s.stream.Info(ctx, jetstream.WithSubjectFilter(chunkSubject+">"))
	if err != nil {
		return 0, err
	}
	n := 0
	for subj := range info.State.Subjects {
		h := strings.TrimPrefix(subj, chunkSubject)
		if live[h] {
			continue
		}
		m, err := s.stream.GetLastMsgForSubject(ctx, subj)
		if err != nil || time.Since(m.Time) < grace {
			continue
		}
		if err := s.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return n, fmt.Errorf("chunk %s: %w", h, err)
		}
		n++
	}
	return n, nil
}
