package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Message is one row of messages; inbound rows come only from PutMessage.
type Message struct {
	ID         int64  `json:"id"`
	ChatJID    string `json:"chat_jid"`
	Platform   string `json:"platform,omitempty"`
	Room       string `json:"room,omitempty"`
	Sender     string `json:"sender,omitempty"`
	Text       string `json:"text"`
	ReplyTo    string `json:"reply_to,omitempty"`
	Verb       string `json:"verb,omitempty"`
	PlatformID string `json:"platform_id,omitempty"`
	Folder     string `json:"folder,omitempty"`
	Topic      string `json:"topic,omitempty"`
	How        string `json:"how,omitempty"`
	Direction  string `json:"direction"`
	Status     string `json:"status,omitempty"`
	CreatedAt  int64  `json:"created_at"`
}

// Chat is one chat's agent cursor and engagement.
type Chat struct {
	JID           string `json:"jid"`
	Platform      string `json:"platform,omitempty"`
	AgentCursor   int64  `json:"agent_cursor"`
	EngagedFolder string `json:"engaged_folder,omitempty"`
	EngagedTopic  string `json:"engaged_topic,omitempty"`
	EngagedAt     int64  `json:"engaged_at,omitempty"`
}

// PutMessage is the only writer of inbound rows. The chat row and the message
// commit together, durably (synchronous=FULL), before it returns. A repeat of
// a (chat, platform_id) pair returns the stored row and dup=true.
func (s *Store) PutMessage(ctx context.Context, m Message) (Message, bool, error) {
	m.Direction, m.Status = "in", ""
	var out Message
	dup := false
	err := s.tx(ctx, func(tx conn) error {
		if err := tx.lock(ctx, s.d.lockMessages); err != nil {
			return err
		}
		t := now()
		if _, err := tx.ExecContext(ctx, `INSERT INTO chats (jid, platform, created_at) VALUES (?, ?, ?) ON CONFLICT (jid) DO NOTHING`,
			m.ChatJID, m.Platform, t); err != nil {
			return err
		}
		id, err := tx.insertID(ctx, `INSERT INTO messages
			(chat_jid, platform, room, sender, text, reply_to, verb, platform_id, folder, topic, how, direction, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'in', ?)
			ON CONFLICT (chat_jid, platform_id) WHERE platform_id != '' DO NOTHING`,
			m.ChatJID, m.Platform, m.Room, m.Sender, m.Text, m.ReplyTo, m.Verb, m.PlatformID, m.Folder, m.Topic, m.How, t)
		if errors.Is(err, sql.ErrNoRows) { // the conflict: a repeat
			dup = true
			out, err = scanMessage(tx.QueryRowContext(ctx, `SELECT `+msgCols+` FROM messages WHERE chat_jid = ? AND platform_id = ?`, m.ChatJID, m.PlatformID))
			return err
		}
		if err != nil {
			return err
		}
		dup, out = false, m
		out.ID, out.CreatedAt = id, t
		return nil
	})
	return out, dup, err
}

const msgCols = `id, chat_jid, platform, room, sender, text, reply_to, verb, platform_id, folder, topic, how, direction, status, created_at`

func scanMessage(sc scanner) (Message, error) {
	var m Message
	err := sc.Scan(&m.ID, &m.ChatJID, &m.Platform, &m.Room, &m.Sender, &m.Text, &m.ReplyTo, &m.Verb, &m.PlatformID,
		&m.Folder, &m.Topic, &m.How, &m.Direction, &m.Status, &m.CreatedAt)
	return m, err
}

// ListMessages returns a chat's messages with id > after, oldest first.
func (s *Store) ListMessages(ctx context.Context, chat string, after int64, limit int) ([]Message, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	return queryAll(ctx, s.db, scanMessage, `SELECT `+msgCols+` FROM messages WHERE chat_jid = ? AND id > ? ORDER BY id LIMIT ?`, chat, after, limit)
}

// CountMessages returns the number of stored messages (all chats).
func (s *Store) CountMessages(ctx context.Context) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM messages`).Scan(&n)
	return n, err
}

// LastInbound returns the newest message a platform brought into chat
// (host-written delegate and escalate rows are not such messages).
func (s *Store) LastInbound(ctx context.Context, chat string) (Message, error) {
	m, err := scanMessage(s.db.QueryRowContext(ctx, `SELECT `+msgCols+` FROM messages
		WHERE chat_jid = ? AND direction = 'in' AND how NOT IN ('delegate', 'escalate') ORDER BY id DESC LIMIT 1`, chat))
	if errors.Is(err, sql.ErrNoRows) {
		return m, fmt.Errorf("chat %q has no inbound message: %w", chat, ErrNotFound)
	}
	return m, err
}

// GetChat returns a chat; a chat never seen is ErrNotFound.
func (s *Store) GetChat(ctx context.Context, jid string) (Chat, error) {
	var c Chat
	err := s.db.QueryRowContext(ctx, `SELECT jid, platform, agent_cursor, engaged_folder, engaged_topic, engaged_at FROM chats WHERE jid = ?`, jid).
		Scan(&c.JID, &c.Platform, &c.AgentCursor, &c.EngagedFolder, &c.EngagedTopic, &c.EngagedAt)
	if errors.Is(err, sql.ErrNoRows) {
		return c, fmt.Errorf("chat %q: %w", jid, ErrNotFound)
	}
	return c, err
}

// SetEngagement records that folder answered the chat at atMillis.
func (s *Store) SetEngagement(ctx context.Context, jid, folder, topic string, atMillis int64) error {
	if err := affected(s.db.ExecContext(ctx, `UPDATE chats SET engaged_folder = ?, engaged_topic = ?, engaged_at = ? WHERE jid = ?`,
		folder, topic, atMillis, jid)); err != nil {
		return fmt.Errorf("chat %q: %w", jid, err)
	}
	return nil
}

// AdvanceCursor moves a chat's agent_cursor forward to id; it never moves back.
func (s *Store) AdvanceCursor(ctx context.Context, jid string, id int64) error {
	if err := affected(s.db.ExecContext(ctx, `UPDATE chats SET agent_cursor = `+s.d.greatest+`(agent_cursor, ?) WHERE jid = ?`, id, jid)); err != nil {
		return fmt.Errorf("chat %q: %w", jid, err)
	}
	return nil
}
