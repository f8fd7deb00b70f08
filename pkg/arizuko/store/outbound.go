package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// Outbound is a message a turn sends to a user, held until an adapter takes it.
type Outbound struct {
	ID            int64  `json:"id"`
	ChatJID       string `json:"chat_jid"`
	Platform      string `json:"platform,omitempty"`
	Folder        string `json:"folder,omitempty"`
	Topic         string `json:"topic,omitempty"`
	Text          string `json:"text"`
	ReplyTo       string `json:"reply_to,omitempty"`
	TurnID        int64  `json:"turn_id,omitempty"`
	Status        string `json:"status"`
	Attempts      int    `json:"attempts"`
	NextAttemptAt int64  `json:"next_attempt_at"`
	CreatedAt     int64  `json:"created_at"`
	// EditOf is the outbound message whose text this one replaces; 0 for a
	// message of its own.
	EditOf int64 `json:"edit_of,omitempty"`
	// Key makes the write idempotent: a second PutOutbound with the same key
	// stores nothing and returns the first message.
	Key string `json:"-"`
}

const outCols = `id, chat_jid, platform, folder, topic, text, reply_to, turn_id, status, attempts, next_attempt_at, created_at, edit_of`

func scanOutbound(sc scanner) (Outbound, error) {
	var o Outbound
	err := sc.Scan(&o.ID, &o.ChatJID, &o.Platform, &o.Folder, &o.Topic, &o.Text, &o.ReplyTo, &o.TurnID, &o.Status,
		&o.Attempts, &o.NextAttemptAt, &o.CreatedAt, &o.EditOf)
	return o, err
}

// PutOutbound stores a pending outbound message. The platform is the chat's
// when the caller leaves it empty; a chat never seen before is created.
func (s *Store) PutOutbound(ctx context.Context, o Outbound) (Outbound, error) {
	err := s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, s.d.lockMessages); err != nil {
			return err
		}
		t := now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO chats (jid, platform, created_at) VALUES (?, ?, ?) ON CONFLICT (jid) DO NOTHING`,
			o.ChatJID, o.Platform, t); err != nil {
			return err
		}
		if o.Key != "" {
			prev, err := scanOutbound(tx.QueryRowContext(ctx, `SELECT `+outCols+` FROM messages WHERE reply_key = ?`, o.Key))
			if err == nil {
				prev.Key, o = o.Key, prev
				return nil
			}
			if !errors.Is(err, sql.ErrNoRows) {
				return err
			}
		}
		if o.Platform == "" {
			if err := tx.QueryRowContext(ctx, `SELECT platform FROM chats WHERE jid = ?`, o.ChatJID).Scan(&o.Platform); err != nil {
				return err
			}
		}
		if o.Platform == "" {
			// A chat first named by an agent: its jid is "<platform>:<id>".
			o.Platform, _, _ = strings.Cut(o.ChatJID, ":")
		}
		var err error
		o.ID, err = tx.insertID(ctx, `INSERT INTO messages (chat_jid, platform, sender, text, reply_to, folder, topic, how,
			direction, status, attempts, next_attempt_at, turn_id, created_at, reply_key, edit_of)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'reply', 'out', 'pending', 0, ?, ?, ?, NULLIF(?, ''), ?)`,
			o.ChatJID, o.Platform, "folder:"+o.Folder, o.Text, o.ReplyTo, o.Folder, o.Topic, t, o.TurnID, t, o.Key, o.EditOf)
		o.Status, o.NextAttemptAt, o.CreatedAt = "pending", t, t
		return err
	})
	return o, err
}

// DueOutbound returns pending messages whose next attempt is at or before nowMillis.
func (s *Store) DueOutbound(ctx context.Context, nowMillis int64, limit int) ([]Outbound, error) {
	if limit <= 0 {
		limit = 100
	}
	return s.queryOutbound(ctx, `SELECT `+outCols+` FROM messages WHERE status = 'pending' AND next_attempt_at <= ?
		ORDER BY next_attempt_at, id LIMIT ?`, nowMillis, limit)
}

// NextOutboundAt is the earliest next_attempt_at of any pending message, 0 if none.
func (s *Store) NextOutboundAt(ctx context.Context) (int64, error) {
	var at sql.NullInt64
	err := s.db.QueryRowContext(ctx, `SELECT MIN(next_attempt_at) FROM messages WHERE status = 'pending'`).Scan(&at)
	return at.Int64, err
}

// GetOutbound returns one outbound message.
func (s *Store) GetOutbound(ctx context.Context, id int64) (Outbound, error) {
	o, err := scanOutbound(s.db.QueryRowContext(ctx, `SELECT `+outCols+` FROM messages WHERE id = ? AND direction = 'out'`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return o, fmt.Errorf("outbound message %d: %w", id, ErrNotFound)
	}
	return o, err
}

// TurnOutbound returns the messages a turn sent, oldest first.
func (s *Store) TurnOutbound(ctx context.Context, turnID int64) ([]Outbound, error) {
	return s.queryOutbound(ctx, `SELECT `+outCols+` FROM messages WHERE direction = 'out' AND turn_id = ? ORDER BY id`, turnID)
}

func (s *Store) queryOutbound(ctx context.Context, q string, args ...any) ([]Outbound, error) {
	return queryAll(ctx, s.db, scanOutbound, q, args...)
}

// MarkSent records that the adapter accepted the message.
func (s *Store) MarkSent(ctx context.Context, id int64) error {
	return affected(s.db.ExecContext(ctx, `UPDATE messages SET status = 'sent', attempts = attempts + 1 WHERE id = ? AND status = 'pending'`, id))
}

// MarkAttempt records a failed attempt: the message stays pending until
// nextMillis, or becomes failed when failed is set.
func (s *Store) MarkAttempt(ctx context.Context, id int64, nextMillis int64, failed bool) error {
	st := "pending"
	if failed {
		st = "failed"
	}
	return affected(s.db.ExecContext(ctx, `UPDATE messages SET status = ?, attempts = attempts + 1, next_attempt_at = ?
		WHERE id = ? AND status = 'pending'`, st, nextMillis, id))
}

// Internal is a message one folder writes to another (delegate, escalate).
type Internal struct {
	ChatJID string
	From    string // sending folder
	To      string // receiving folder
	Topic   string
	Text    string
	How     string // "delegate" or "escalate"
	Depth   int
}

// PutInternal stores a host-written inbound message for another folder's
// next turn, carrying the delegation depth the host tracks.
func (s *Store) PutInternal(ctx context.Context, in Internal) (int64, error) {
	var id int64
	err := s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, s.d.lockMessages); err != nil {
			return err
		}
		t := now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO chats (jid, created_at) VALUES (?, ?) ON CONFLICT (jid) DO NOTHING`, in.ChatJID, t); err != nil {
			return err
		}
		var err error
		id, err = tx.insertID(ctx, `INSERT INTO messages (chat_jid, sender, text, folder, topic, how, direction, depth, created_at)
			VALUES (?, ?, ?, ?, ?, ?, 'in', ?, ?)`, in.ChatJID, "folder:"+in.From, in.Text, in.To, in.Topic, in.How, in.Depth, t)
		return err
	})
	return id, err
}

// RecentFolderMessages returns up to limit of the newest messages (both
// directions, observe rows included) stored for folder, oldest first.
func (s *Store) RecentFolderMessages(ctx context.Context, folder string, limit int) ([]Message, error) {
	return queryAll(ctx, s.db, scanMessage, `SELECT * FROM (SELECT `+msgCols+` FROM messages WHERE folder = ? ORDER BY id DESC LIMIT ?) AS recent ORDER BY id`, folder, limit)
}
