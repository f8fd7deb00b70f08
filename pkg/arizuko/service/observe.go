package service

import (
	"context"

	"github.com/crackbox/crackbox/pkg/arizuko/folder"
	"github.com/crackbox/crackbox/pkg/arizuko/store"
)

// ListObservations lists which folders observe which (one observer's, or
// all when observer is ""); needs observe:read on the observer, or on the
// whole tree for all.
func (l *Local) ListObservations(ctx context.Context, observer string) ([]store.Observation, error) {
	if observer != "" {
		if err := folder.Validate(observer); err != nil {
			return nil, err
		}
	}
	if observer != "" {
		if err := l.check(ctx, "observe:read", observer); err != nil {
			return nil, err
		}
		return l.st.ListObservations(ctx, observer)
	}
	show, err := l.visible(ctx, "observe:read")
	if err != nil {
		return nil, err
	}
	os, err := l.st.ListObservations(ctx, observer)
	return filter(os, show, func(o store.Observation) string { return o.Observer }), err
}

// RemoveObservation ends observer's observation of source; needs observe:rm
// on the observer.
func (l *Local) RemoveObservation(ctx context.Context, observer, source string) error {
	for _, f := range []string{observer, source} {
		if err := folder.Validate(f); err != nil {
			return err
		}
	}
	if err := l.check(ctx, "observe:rm", observer); err != nil {
		return err
	}
	return l.st.RemoveObserver(ctx, observer, source)
}
