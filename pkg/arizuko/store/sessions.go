package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Session maps (folder, topic) to the agent's session id.
type Session struct {
	Folder      string `json:"folder"`
	Topic       string `json:"topic,omitempty"`
	SessionID   string `json:"session_id"`
	ParentTopic string `json:"parent_topic,omitempty"`
}

// GetSession returns the session of (folder, topic).
func (s *Store) GetSession(ctx context.Context, folder, topic string) (Session, error) {
	x := Session{Folder: folder, Topic: topic}
	err := s.db.QueryRowContext(ctx, `SELECT session_id, parent_topic FROM sessions WHERE folder = ? AND topic = ?`, folder, topic).
		Scan(&x.SessionID, &x.ParentTopic)
	if errors.Is(err, sql.ErrNoRows) {
		return x, fmt.Errorf("session %s#%s: %w", folder, topic, ErrNotFound)
	}
	return x, err
}

// EnsureSession returns the session of (folder, topic), creating it with
// newID when there is none.
func (s *Store) EnsureSession(ctx context.Context, folder, topic, newID string) (Session, error) {
	t := now()
	if _, err := s.db.ExecContext(ctx, `INSERT INTO sessions (folder, topic, session_id, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (folder, topic) DO UPDATE SET updated_at = excluded.updated_at`, folder, topic, newID, t, t); err != nil {
		if s.isForeignKey(err) {
			return Session{}, fmt.Errorf("folder %q: %w", folder, ErrNotFound)
		}
		return Session{}, err
	}
	return s.GetSession(ctx, folder, topic)
}

// InsertSession creates a topic's session; an existing topic is ErrExists.
func (s *Store) InsertSession(ctx context.Context, x Session) error {
	t := now()
	_, err := s.db.ExecContext(ctx, `INSERT INTO sessions (folder, topic, session_id, parent_topic, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
		x.Folder, x.Topic, x.SessionID, x.ParentTopic, t, t)
	if s.isUnique(err) {
		return fmt.Errorf("session %s#%s: %w", x.Folder, x.Topic, ErrExists)
	}
	return err
}

// AddObserver makes observer's prompts include source's recent messages.
func (s *Store) AddObserver(ctx context.Context, observer, source string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO observers (observer, source, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING`,
		observer, source, now())
	if s.isForeignKey(err) {
		return fmt.Errorf("observe %s from %s: %w", source, observer, ErrNotFound)
	}
	return err
}

// RemoveObserver stops observing.
func (s *Store) RemoveObserver(ctx context.Context, observer, source string) error {
	return affected(s.db.ExecContext(ctx, `DELETE FROM observers WHERE observer = ? AND source = ?`, observer, source))
}

// Observed lists the folders observer watches.
func (s *Store) Observed(ctx context.Context, observer string) ([]string, error) {
	return queryAll(ctx, s.db, scanString, `SELECT source FROM observers WHERE observer = ? ORDER BY source`, observer)
}

// Observation is one observer folder watching a source folder.
type Observation struct {
	Observer  string `json:"observer"`
	Source    string `json:"source"`
	CreatedAt int64  `json:"created_at"`
}

// ListObservations returns the observations of observer, or all when it is "".
func (s *Store) ListObservations(ctx context.Context, observer string) ([]Observation, error) {
	return queryAll(ctx, s.db, func(sc scanner) (Observation, error) {
		var o Observation
		err := sc.Scan(&o.Observer, &o.Source, &o.CreatedAt)
		return o, err
	}, `SELECT observer, source, created_at FROM observers WHERE ? = '' OR observer = ? ORDER BY observer, source`, observer, observer)
}

// Adapter is a platform's callback: outbound messages go to <URL>/send,
// signed with Secret.
type Adapter struct {
	Platform    string `json:"platform"`
	CallbackURL string `json:"callback_url"`
	Secret      string `json:"secret,omitempty"`
}

// SetAdapter registers or replaces a platform's callback URL.
func (s *Store) SetAdapter(ctx context.Context, a Adapter) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO adapters (platform, callback_url, secret, created_at) VALUES (?, ?, ?, ?)
		ON CONFLICT (platform) DO UPDATE SET callback_url = excluded.callback_url, secret = excluded.secret`, a.Platform, a.CallbackURL, a.Secret, now())
	return err
}

// GetAdapter returns a platform's adapter.
func (s *Store) GetAdapter(ctx context.Context, platform string) (Adapter, error) {
	a := Adapter{Platform: platform}
	err := s.db.QueryRowContext(ctx, `SELECT callback_url, secret FROM adapters WHERE platform = ?`, platform).Scan(&a.CallbackURL, &a.Secret)
	if errors.Is(err, sql.ErrNoRows) {
		return a, fmt.Errorf("adapter %q: %w", platform, ErrNotFound)
	}
	return a, err
}

// DeleteAdapter unregisters a platform.
func (s *Store) DeleteAdapter(ctx context.Context, platform string) error {
	return affected(s.db.ExecContext(ctx, `DELETE FROM adapters WHERE platform = ?`, platform))
}
