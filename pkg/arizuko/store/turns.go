package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
)

// Turn statuses.
const (
	TurnQueued  = "queued"
	TurnRunning = "running"
	TurnDone    = "done"
	TurnFailed  = "failed"
)

// Turn is one agent turn: the guest run that answers a folder's messages.
type Turn struct {
	ID           int64  `json:"id"`
	Folder       string `json:"folder"`
	Topic        string `json:"topic,omitempty"`
	SessionID    string `json:"session_id,omitempty"`
	Status       string `json:"status"`
	Outcome      string `json:"outcome,omitempty"`
	Attempts     int    `json:"attempts"`
	FirstMessage int64  `json:"first_message"`
	LastMessage  int64  `json:"last_message"`
	Depth        int    `json:"depth,omitempty"`
	ExitCode     *int   `json:"exit_code,omitempty"`
	Egress       string `json:"egress_summary,omitempty"`
	Error        string `json:"error,omitempty"`
	StartedAt    int64  `json:"started_at,omitempty"`
	EndedAt      int64  `json:"ended_at,omitempty"`
	CreatedAt    int64  `json:"created_at"`
}

const turnCols = `id, folder, topic, session_id, status, outcome, attempts, first_message, last_message, depth,
	exit_code, egress_summary, error, started_at, ended_at, created_at`

func scanTurn(sc scanner) (Turn, error) {
	var t Turn
	var exit sql.NullInt64
	err := sc.Scan(&t.ID, &t.Folder, &t.Topic, &t.SessionID, &t.Status, &t.Outcome, &t.Attempts, &t.FirstMessage,
		&t.LastMessage, &t.Depth, &exit, &t.Egress, &t.Error, &t.StartedAt, &t.EndedAt, &t.CreatedAt)
	if exit.Valid {
		n := int(exit.Int64)
		t.ExitCode = &n
	}
	return t, err
}

// PendingInbound returns the inbound, non-observe messages of (folder, topic)
// no turn has claimed yet: those after the highest last_message of any of its
// turns, oldest first.
func (s *Store) PendingInbound(ctx context.Context, folder, topic string, limit int) ([]Message, error) {
	if limit <= 0 {
		limit = 200
	}
	return queryAll(ctx, s.db, scanMessage, `SELECT `+msgCols+` FROM messages
		WHERE folder = ? AND topic = ? AND direction = 'in' AND how != 'observe'
		AND id > (SELECT COALESCE(MAX(last_message), 0) FROM turns WHERE folder = ? AND topic = ?)
		ORDER BY id LIMIT ?`, folder, topic, folder, topic, limit)
}

// WorkKey names a (folder, topic) with work waiting.
type WorkKey struct {
	Folder string
	Topic  string
}

// PendingWork lists every (folder, topic) holding an open turn or unclaimed
// inbound messages, a removed folder's (RemovedPrefix) never; the turn queue
// sweeps it at start and periodically.
func (s *Store) PendingWork(ctx context.Context) ([]WorkKey, error) {
	return queryAll(ctx, s.db, func(sc scanner) (WorkKey, error) {
		var k WorkKey
		err := sc.Scan(&k.Folder, &k.Topic)
		return k, err
	}, `
		SELECT folder, topic FROM turns WHERE status IN ('queued', 'running') AND folder NOT LIKE '#%'
		UNION
		SELECT m.folder, m.topic FROM messages m
		WHERE m.folder != '' AND m.folder NOT LIKE '#%' AND m.direction = 'in' AND m.how != 'observe'
		AND m.id > (SELECT COALESCE(MAX(t.last_message), 0) FROM turns t WHERE t.folder = m.folder AND t.topic = m.topic)
		ORDER BY 1, 2`)
}

// CreateTurn claims the messages first..last of (folder, topic) for a new
// queued turn. The depth is the deepest delegation among those messages.
func (s *Store) CreateTurn(ctx context.Context, folder, topic string, first, last int64) (Turn, error) {
	var t Turn
	err := s.tx(ctx, func(tx conn) error {
		var depth int
		if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(depth), 0) FROM messages WHERE folder = ? AND topic = ? AND id BETWEEN ? AND ?`,
			folder, topic, first, last).Scan(&depth); err != nil {
			return err
		}
		var err error
		t, err = scanTurn(tx.QueryRowContext(ctx, `INSERT INTO turns (folder, topic, status, first_message, last_message, depth, created_at)
			VALUES (?, ?, 'queued', ?, ?, ?, ?) RETURNING `+turnCols, folder, topic, first, last, depth, now()))
		return err
	})
	return t, err
}

// GetTurn returns one turn.
func (s *Store) GetTurn(ctx context.Context, id int64) (Turn, error) {
	t, err := scanTurn(s.db.QueryRowContext(ctx, `SELECT `+turnCols+` FROM turns WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return t, fmt.Errorf("turn %d: %w", id, ErrNotFound)
	}
	return t, err
}

// OpenTurns returns the queued or running turns of a folder, oldest first:
// a daemon that died mid-turn left them, and they run again.
func (s *Store) OpenTurns(ctx context.Context, folder string) ([]Turn, error) {
	return s.queryTurns(ctx, `SELECT `+turnCols+` FROM turns WHERE folder = ? AND status IN ('queued', 'running') ORDER BY id`, folder)
}

// ListTurns returns the newest turns first, of one folder or all ("").
func (s *Store) ListTurns(ctx context.Context, folder string, limit int) ([]Turn, error) {
	if limit <= 0 || limit > 1000 {
		limit = 50
	}
	if folder == "" {
		return s.queryTurns(ctx, `SELECT `+turnCols+` FROM turns ORDER BY id DESC LIMIT ?`, limit)
	}
	return s.queryTurns(ctx, `SELECT `+turnCols+` FROM turns WHERE folder = ? ORDER BY id DESC LIMIT ?`, folder, limit)
}

func (s *Store) queryTurns(ctx context.Context, q string, args ...any) ([]Turn, error) {
	return queryAll(ctx, s.db, scanTurn, q, args...)
}

// StartTurn marks a turn running, counts the attempt and records its session.
func (s *Store) StartTurn(ctx context.Context, id int64, sessionID string) error {
	return affected(s.db.ExecContext(ctx, `UPDATE turns SET status = 'running', attempts = attempts + 1, session_id = ?,
		started_at = ?, ended_at = 0 WHERE id = ?`, sessionID, now(), id))
}

// RequeueTurn puts a failed attempt back in the queue for a retry.
func (s *Store) RequeueTurn(ctx context.Context, id int64, errText string) error {
	return affected(s.db.ExecContext(ctx, `UPDATE turns SET status = 'queued', error = ? WHERE id = ?`, errText, id))
}

// TurnEnd is how a turn ended.
type TurnEnd struct {
	Status   string // TurnDone or TurnFailed
	Outcome  string
	ExitCode *int
	Egress   string
	Error    string
	// Override puts Outcome before one the agent submitted, which otherwise wins.
	Override bool
}

// FinishTurn records the end of a turn and moves the agent_cursor of every
// chat it answered past its messages, in one transaction.
func (s *Store) FinishTurn(ctx context.Context, id int64, e TurnEnd) error {
	if e.Status != TurnDone && e.Status != TurnFailed {
		return fmt.Errorf("turn %d: status %q: want done or failed", id, e.Status)
	}
	return s.tx(ctx, func(tx conn) error {
		var exit any
		if e.ExitCode != nil {
			exit = *e.ExitCode
		}
		// An outcome the agent submitted with submit_turn wins over the host's,
		// unless the host's overrides it; then the agent's follows in brackets.
		if err := affected(tx.ExecContext(ctx, `UPDATE turns SET status = ?, outcome = CASE WHEN outcome = '' THEN ?
			WHEN ? THEN ? || ' (the agent submitted: ' || outcome || ')' ELSE outcome END,
			exit_code = ?, egress_summary = ?, error = ?, ended_at = ? WHERE id = ?`,
			e.Status, e.Outcome, e.Override, e.Outcome, exit, e.Egress, e.Error, now(), id)); err != nil {
			return fmt.Errorf("turn %d: %w", id, err)
		}
		_, err := tx.ExecContext(ctx, `UPDATE chats SET agent_cursor = `+s.d.greatest+`(agent_cursor, (
				SELECT MAX(m.id) FROM messages m, turns t WHERE t.id = ? AND m.chat_jid = chats.jid
				AND m.folder = t.folder AND m.topic = t.topic AND m.id BETWEEN t.first_message AND t.last_message))
			WHERE jid IN (SELECT m.chat_jid FROM messages m, turns t WHERE t.id = ?
				AND m.folder = t.folder AND m.topic = t.topic AND m.id BETWEEN t.first_message AND t.last_message)`, id, id)
		return err
	})
}

// RequeueTurns puts failed turns with the given outcome back in the queue as
// never attempted, for a cause that is gone now (secrets that did not open); a
// removed folder's (RemovedPrefix) stay as they are.
func (s *Store) RequeueTurns(ctx context.Context, outcome string) (int64, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE turns SET status = 'queued', outcome = '', attempts = 0, ended_at = 0
		WHERE status = 'failed' AND outcome = ? AND folder NOT LIKE '#%'`, outcome)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// SubmitTurn records the agent's own status and result for its turn.
func (s *Store) SubmitTurn(ctx context.Context, id int64, outcome string) error {
	return affected(s.db.ExecContext(ctx, `UPDATE turns SET outcome = ? WHERE id = ?`, outcome, id))
}

// TurnMessages returns the inbound messages a turn answers, oldest first.
func (s *Store) TurnMessages(ctx context.Context, t Turn) ([]Message, error) {
	return queryAll(ctx, s.db, scanMessage, `SELECT `+msgCols+` FROM messages WHERE folder = ? AND topic = ? AND direction = 'in'
		AND how != 'observe' AND id BETWEEN ? AND ? ORDER BY id`, t.Folder, t.Topic, t.FirstMessage, t.LastMessage)
}
